"""Parla from Python: speech in the right language, with word events timed to what is heard.

    import parla

    with parla.Synthesizer() as synth:
        synth.on_event(lambda e: print(e.kind, e.text))
        reading = synth.speak("Hello world. Καλημέρα κόσμε.")
        if synth.announce("Battery low").wait():
            print("the announcement was heard in full")
        synth.wait(reading)

Ranges (``Event.start``/``Event.end``, ``Word.start``/``Word.end``) are indices into the
Python string that was spoken: ``text[event.start:event.end]`` is the word being heard.
Every failure raises a :class:`parla.Error`, of a subclass that says what kind:
:class:`UnknownVoiceError` (also a ``LookupError``), :class:`TimeoutError` (also the built-in
``TimeoutError``), :class:`InvalidArgumentError` (also a ``ValueError``), and so on.
"""

from __future__ import annotations

import asyncio
import atexit
import builtins
import ctypes
import os
import queue as _queue
import threading
import time as _time
import traceback
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Optional, Union

from . import _lib
from ._lib import ChunkKind, EventKind

__all__ = [
    "Announcement",
    "AudioError",
    "Chunk",
    "ChunkKind",
    "EngineError",
    "Error",
    "Event",
    "EventKind",
    "FileError",
    "InvalidArgumentError",
    "InvalidTextError",
    "Segment",
    "SSMLError",
    "Synthesizer",
    "Timeline",
    "TimeoutError",
    "UnknownLanguageError",
    "UnknownVoiceError",
    "Voice",
    "VoiceInstallError",
    "Word",
    "MergeReport",
    "RenderResult",
    "detect",
    "install_voice",
    "merge",
    "remove_voice",
    "render",
    "version",
    "voices",
]

PathLike = Union[str, "os.PathLike[str]"]


class Error(Exception):
    """A Parla failure: ``str(error)`` says what happened and what to do; ``status`` is
    libparla's code (``parla_status``), 0 when the failure is the Python package's own.
    Parla raises one of its subclasses, each for one kind of failure."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(Error, ValueError):
    """An argument Parla cannot take: None or a wrong type where a value is needed, a closed
    handle, a value out of its range."""


class InvalidTextError(InvalidArgumentError):
    """Text that is not valid Unicode (a lone surrogate) or holds a NUL character."""


class SSMLError(InvalidArgumentError):
    """Malformed SSML; the message gives the line and column."""


class UnknownVoiceError(Error, LookupError):
    """No voice with that identifier (or, installing, no voice of that name in the catalog)."""


class UnknownLanguageError(Error, LookupError):
    """Not a language tag, or no voice speaks the language."""


class AudioError(Error):
    """No sound server, no such device, or the server went away."""


class EngineError(Error):
    """espeak-ng or ONNX Runtime is missing or failed."""


class FileError(Error, OSError):
    """A file could not be read or written."""


class TimeoutError(Error, builtins.TimeoutError):
    """A wait ran out of time before the utterance ended (or before the next event)."""


class VoiceInstallError(Error):
    """Installing or removing a voice failed: the catalog could not be reached or read, a
    file arrived damaged, the disk is full, another install of it is running."""


# parla_status -> the exception it raises.
_ERRORS: "dict[int, type[Error]]" = {
    _lib.STATUS["invalid_argument"]: InvalidArgumentError,
    _lib.STATUS["invalid_handle"]: InvalidArgumentError,
    _lib.STATUS["invalid_utf8"]: InvalidTextError,
    _lib.STATUS["out_of_range"]: InvalidArgumentError,
    _lib.STATUS["unknown_voice"]: UnknownVoiceError,
    _lib.STATUS["unknown_language"]: UnknownLanguageError,
    _lib.STATUS["ssml"]: SSMLError,
    _lib.STATUS["audio"]: AudioError,
    _lib.STATUS["engine"]: EngineError,
    _lib.STATUS["io"]: FileError,
    _lib.STATUS["timeout"]: TimeoutError,
}
_UNKNOWN_VOICE = _lib.STATUS["unknown_voice"]
_INSTALL_FAILURES = (_lib.STATUS["io"], _lib.STATUS["failed"])


def _error(message: str, status: int = 0) -> Error:
    return _ERRORS.get(status, Error)(message, status)


_library: Optional[ctypes.CDLL] = None
_library_lock = threading.Lock()


def _c() -> ctypes.CDLL:
    global _library
    with _library_lock:
        if _library is None:
            try:
                _library = _lib.load()
            except OSError as error:
                raise Error(str(error)) from None
        return _library


def _last_error() -> str:
    message = _c().parla_last_error()
    return message.decode("utf-8", "replace") if message else "unknown error"


def _check(status: int) -> None:
    if status != _lib.PARLA_OK:
        raise _error(_last_error(), status)


def _encode(text: str, what: str = "text") -> bytes:
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{what} must be a str, not {type(text).__name__}")
    if "\0" in text:
        raise InvalidTextError(f"{what} contains a NUL character")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidTextError(f"{what} is not valid Unicode (a lone surrogate at index {error.start})") from None


def _decode(value: Optional[bytes]) -> Optional[str]:
    return value.decode("utf-8", "replace") if value is not None else None


def version() -> str:
    """libparla's version, "MAJOR.MINOR.PATCH"."""
    return str(_c().parla_version().decode())


# MARK: Values


@dataclass(frozen=True)
class Event:
    """Something that happened to an utterance, at the moment the listener hears it."""

    kind: EventKind
    """started, word, sentence, mark, resumed, paused, continued, or a terminal one:
    finished, interrupted (cut off while speaking), dropped (never started), failed."""
    utterance: int
    """The id :meth:`Synthesizer.speak` returned."""
    time: float
    """When it is heard, in seconds on the monotonic clock (``time.monotonic()``)."""
    start: Optional[int] = None
    """For word, sentence and resumed: the range in the spoken str, ``text[start:end]``."""
    end: Optional[int] = None
    text: Optional[str] = None
    """The word or sentence as spoken."""
    audio_time: Optional[float] = None
    """Where its sound starts in the utterance's audio, in seconds."""
    mark: Optional[str] = None
    error: Optional[str] = None
    heard: Optional[bool] = None
    """For the terminal event of an announcement: whether it was heard in full."""

    @property
    def is_terminal(self) -> bool:
        """Whether this is the utterance's last event."""
        return self.kind in _lib.TERMINAL


@dataclass(frozen=True)
class Word:
    """A word (or sentence) of a rendered text and the audio that speaks it."""

    text: str
    start: int
    """Index into the str given to :meth:`Synthesizer.write`: ``text[start:end]``."""
    end: int
    start_time: float
    """Seconds from the start of the audio."""
    end_time: float
    language: Optional[str]
    voice: Optional[str]
    """The identifier of the voice that speaks it."""
    estimated: bool
    """True where the time was interpolated rather than reported by the engine."""
    phonemes: Optional[str] = None
    """A word's phonemes (IPA) as the voice was given them; None for a sentence, or where the
    engine did not say."""


@dataclass(frozen=True)
class Chunk:
    """A piece of :meth:`Synthesizer.synthesize`'s output: audio, a word or sentence with
    the samples that speak it, or an SSML mark with the sample where it is reached."""

    kind: ChunkKind
    """audio, word, sentence or mark."""
    sample: int
    """audio: the index of its first sample in the utterance's audio; word, sentence: where
    its audio starts; mark: where it is reached (where the first word that does not end
    before it starts; after the last word, the audio's end)."""
    end_sample: int
    sample_rate: int
    samples: Optional[bytes] = None
    """audio: 16-bit mono PCM in the machine's byte order (little-endian on x86-64, arm64)."""
    start: Optional[int] = None
    """word, sentence: ``text[start:end]`` of the str given; mark: where it sits in the
    markup (``start == end``)."""
    end: Optional[int] = None
    text: Optional[str] = None
    """word: as spoken; mark: the mark's name."""


@dataclass(frozen=True)
class Timeline:
    """What :meth:`Synthesizer.write` rendered: its words and sentences with times."""

    words: list[Word]
    sentences: list[Word]
    duration: float
    sample_rate: int


@dataclass(frozen=True)
class Voice:
    """An installed voice."""

    identifier: str
    """What ``voice=`` takes: "espeak-ng.en-us", "piper.en_US-joe-medium"."""
    name: str
    engine: str
    languages: list[str]
    quality: Optional[str]
    sample_rate: int


@dataclass(frozen=True)
class Segment:
    """A stretch of text in one language, as :func:`detect` finds it."""

    start: int
    end: int
    language: Optional[str]
    """BCP 47, or None where no language can be told (digits, symbols, emoji)."""
    confidence: float
    text: str


# MARK: Module functions


def voices() -> list[Voice]:
    """Every installed voice: espeak-ng's, and Piper's in the voice directories."""
    c = _c()
    handle = ctypes.c_void_p()
    _check(c.parla_voices(ctypes.byref(handle)))
    try:
        result = []
        for i in range(c.parla_voice_list_count(handle)):
            v = _lib.Voice()
            _check(c.parla_voice_list_get(handle, i, ctypes.byref(v)))
            result.append(
                Voice(
                    identifier=_decode(v.identifier) or "",
                    name=_decode(v.name) or "",
                    engine=_decode(v.engine) or "",
                    languages=(_decode(v.languages) or "").split(",") if v.languages else [],
                    quality=_decode(v.quality),
                    sample_rate=v.sample_rate,
                )
            )
        return result
    finally:
        c.parla_voice_list_free(handle)


def install_voice(
    name: str, catalog: Optional[str] = None, progress: Optional[Callable[[str, int, int], None]] = None
) -> None:
    """Installs Piper voice ``name`` ("en_US-joe-medium") from Piper's catalog into the
    user's voice directory (``~/.local/share/parla/voices``), as ``parla voices install``
    does: each file is checked against the catalog's size and md5, a broken transfer resumes
    where it stopped when called again, and the voice appears only once whole.

    ``catalog``: a URL or directory with Piper's layout (default: ``$PARLA_VOICE_CATALOG``,
    else Hugging Face's rhasspy/piper-voices). ``progress(file, bytes, total)`` is called as
    each file arrives. Raises :class:`UnknownVoiceError` for a name the catalog lacks (the
    message names the nearest), :class:`VoiceInstallError` for the rest. Needs curl."""
    c = _c()

    def report(file: Optional[bytes], done: int, total: int, _user: Optional[int]) -> None:
        if progress is not None:
            try:
                progress(_decode(file) or "", done, total)
            except BaseException:  # an exception must not cross into C
                traceback.print_exc()

    callback = _lib.INSTALL_PROGRESS(report)
    status = c.parla_install_voice(_encode(name, "name"), _encode(catalog, "catalog") if catalog is not None else None, callback, None)
    if status != _lib.PARLA_OK:
        message = _last_error()
        raise (
            UnknownVoiceError
            if status == _UNKNOWN_VOICE
            else VoiceInstallError
            if status in _INSTALL_FAILURES
            else _ERRORS.get(status, Error)
        )(message, status)


def remove_voice(name: str) -> None:
    """Removes a voice :func:`install_voice` installed (and its prepared copies in Parla's
    cache). Raises :class:`UnknownVoiceError` if it is not in the user's voice directory."""
    status = _c().parla_remove_voice(_encode(name, "name"))
    if status != _lib.PARLA_OK:
        message = _last_error()
        raise (UnknownVoiceError if status == _UNKNOWN_VOICE else VoiceInstallError)(message, status)


def detect(text: str) -> list[Segment]:
    """Splits ``text`` into stretches by language, as speaking it would."""
    c = _c()
    handle = ctypes.c_void_p()
    _check(c.parla_detect(_encode(text), ctypes.byref(handle)))
    try:
        result = []
        for i in range(c.parla_segment_list_count(handle)):
            s = _lib.Segment()
            _check(c.parla_segment_list_get(handle, i, ctypes.byref(s)))
            result.append(
                Segment(
                    start=s.scalar_start,
                    end=s.scalar_end,
                    language=_decode(s.language),
                    confidence=s.confidence,
                    text=text[s.scalar_start : s.scalar_end],
                )
            )
        return result
    finally:
        c.parla_segment_list_free(handle)


# MARK: The synthesizer


@dataclass
class _Utterance:
    events: list[Event] = field(default_factory=list)
    ended: Optional[Event] = None


class Announcement:
    """An announcement that was scheduled: :meth:`wait` says whether it was heard in full."""

    def __init__(self, synthesizer: "Synthesizer", utterance: int, text: str) -> None:
        self._synthesizer = synthesizer
        self.utterance = utterance
        """Its id, as its events carry it."""
        self.text = text

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until it ends; True if it was spoken to the end, False if it was cut off,
        dropped or failed. Raises :class:`Error` if ``timeout`` seconds pass first."""
        ended = self._synthesizer._wait_event(self.utterance, timeout)
        return bool(ended.heard) if ended.heard is not None else ended.kind == "finished"

    @property
    def done(self) -> bool:
        """Whether it has ended."""
        return self._synthesizer._ended(self.utterance) is not None

    def __repr__(self) -> str:
        return f"Announcement({self.utterance}, {self.text!r})"


_open: "weakref.WeakSet[Synthesizer]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for synthesizer in list(_open):
        synthesizer.close()


class Synthesizer:
    """Live speech through PulseAudio or PipeWire, with the scheduling of iOS's
    ``AVSpeechSynthesizer`` and accessibility announcements, and files.

    ``device`` is a sink name (None: the default one). Use it as a context manager, or call
    :meth:`close`: closing stops its speech at once.
    """

    _KEPT = 1000  # utterances whose events are kept for events(utterance) and wait

    def __init__(self, device: Optional[str] = None) -> None:
        c = _c()
        handle = c.parla_synthesizer_new(_encode(device, "device") if device is not None else None)
        if not handle:
            raise _error(_last_error(), c.parla_last_status())
        self._handle: Optional[int] = handle
        self._condition = threading.Condition()
        self._utterances: "OrderedDict[int, _Utterance]" = OrderedDict()
        # on_event's callbacks and the inboxes of events() and aevents(): each gets every event.
        self._subscribers: list[Callable[[Event], None]] = []
        self._callback = _lib.CALLBACK(self._deliver)  # kept alive as long as the handle
        _check(c.parla_set_event_callback(handle, self._callback, None))
        _open.add(self)

    # Events arrive here, on Parla's event thread.
    def _deliver(self, pointer: "ctypes._Pointer[_lib.Event]", _user: Optional[int]) -> None:
        try:
            e = pointer.contents
            kind: EventKind = _lib.EVENT_KINDS.get(e.kind, "unknown")
            has_range = e.scalar_start >= 0
            event = Event(
                kind=kind,
                utterance=e.utterance,
                time=e.time_ns / 1e9,
                start=e.scalar_start if has_range else None,
                end=e.scalar_end if has_range else None,
                text=_decode(e.text),
                audio_time=e.audio_ns / 1e9 if e.audio_ns >= 0 else None,
                mark=_decode(e.mark),
                error=_decode(e.error),
                heard=None if e.announcement_heard < 0 else bool(e.announcement_heard),
            )
            self._dispatch(event)
        except BaseException:  # never let an exception unwind into C
            pass

    def _dispatch(self, event: Event) -> None:
        with self._condition:
            record = self._record(event.utterance)
            record.events.append(event)
            if event.is_terminal:
                record.ended = event
            listeners = list(self._subscribers)
            self._condition.notify_all()
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # a listener's error must not reach Parla's thread
                traceback.print_exc()

    def _record(self, utterance: int) -> _Utterance:
        record = self._utterances.get(utterance)
        if record is None:
            record = self._utterances[utterance] = _Utterance()
            while len(self._utterances) > self._KEPT:
                self._utterances.popitem(last=False)
        return record

    def _ended(self, utterance: int) -> Optional[Event]:
        with self._condition:
            record = self._utterances.get(utterance)
            return record.ended if record else None

    def _wait_event(self, utterance: int, timeout: Optional[float]) -> Event:
        # Waited for in slices, so that Ctrl-C (KeyboardInterrupt) gets through at once.
        with self._condition:
            if utterance not in self._utterances:
                raise InvalidArgumentError(f"utterance {utterance} was not spoken by this synthesizer")
            remaining = timeout
            while True:
                ended = self._utterances[utterance].ended
                if ended is not None:
                    return ended
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"utterance {utterance} had not ended after {timeout} s", _lib.TIMEOUT)
                step = 0.1 if remaining is None else min(0.1, remaining)
                self._condition.wait(step)
                if remaining is not None:
                    remaining -= step

    def _live(self) -> int:
        if self._handle is None:
            raise InvalidArgumentError("the synthesizer is closed", 2)
        return self._handle

    def _utterance(
        self,
        text: str,
        *,
        ssml: bool,
        language: Optional[str],
        voice: Optional[str],
        rate: float,
        pitch: float,
        volume: float,
        resume_after_interruption: bool = False,
        priority: Optional[str] = None,
        queue: bool = False,
        prefer_voices: Optional[Mapping[str, str]] = None,
    ) -> int:
        c = _c()
        data = _encode(text)
        handle = c.parla_utterance_new_ssml(data) if ssml else c.parla_utterance_new(data)
        if not handle:
            raise _error(_last_error(), c.parla_last_status())
        try:
            if language is not None:
                _check(c.parla_utterance_set_language(handle, _encode(language, "language")))
            if voice is not None:
                _check(c.parla_utterance_set_voice(handle, _encode(voice, "voice")))
            for tag, preferred in (prefer_voices or {}).items():
                _check(c.parla_utterance_prefer_voice(handle, _encode(tag, "language"), _encode(preferred, "voice")))
            _check(c.parla_utterance_set_rate(handle, float(rate)))
            _check(c.parla_utterance_set_pitch(handle, float(pitch)))
            _check(c.parla_utterance_set_volume(handle, float(volume)))
            _check(c.parla_utterance_set_resumes_after_interruption(handle, int(bool(resume_after_interruption))))
            if priority is not None:
                if priority not in _lib.PRIORITIES or priority == "none":
                    raise InvalidArgumentError(f"priority must be 'low', 'default' or 'high', not {priority!r}")
                _check(c.parla_utterance_set_announcement(handle, _lib.PRIORITIES[priority], int(bool(queue))))
        except BaseException:
            c.parla_utterance_free(handle)
            raise
        return int(handle)

    def speak(
        self,
        text: str,
        *,
        language: Optional[str] = None,
        voice: Optional[str] = None,
        rate: float = 1.0,
        pitch: float = 1.0,
        volume: float = 1.0,
        ssml: bool = False,
        resume_after_interruption: bool = False,
        prefer_voices: Optional[Mapping[str, str]] = None,
    ) -> int:
        """Queues ``text`` (first in, first out) and returns its id at once.

        ``language`` (BCP 47; None: detected per part), ``voice`` (an identifier from
        :func:`voices`), ``rate`` (0.25–6), ``pitch`` (0–2) and ``volume`` (0–2), each a
        multiple of the voice's own (1: as the voice is); ``ssml`` reads ``text`` as SSML.
        With ``resume_after_interruption``, an announcement that cuts it off is followed by
        the rest, from the sentence it cut. ``prefer_voices`` maps languages
        to voices for the parts in them (``{"en": "piper.en_US-joe-medium"}``). Text that
        cannot be spoken ends with a ``failed`` event.
        """
        c = _c()
        handle = self._utterance(
            text,
            ssml=ssml,
            language=language,
            voice=voice,
            rate=rate,
            pitch=pitch,
            volume=volume,
            resume_after_interruption=resume_after_interruption,
            prefer_voices=prefer_voices,
        )
        return self._submit(lambda ident: c.parla_speak(self._live(), handle, ident), handle)

    def _submit(self, call: Callable[[object], int], handle: Optional[int] = None) -> int:
        c = _c()
        ident = ctypes.c_uint64()
        try:
            with self._condition:  # registered before its first event can be delivered
                _check(call(ctypes.byref(ident)))
                self._record(ident.value)
        finally:
            if handle is not None:
                c.parla_utterance_free(handle)
        return ident.value

    def announce(
        self,
        text: str,
        priority: str = "default",
        queue: bool = False,
        *,
        language: Optional[str] = None,
        voice: Optional[str] = None,
        rate: float = 1.0,
        volume: float = 1.0,
    ) -> Announcement:
        """Schedules an announcement and returns at once.

        ``priority``: "high" interrupts and is not interrupted once started, "default"
        interrupts and can be interrupted, "low" waits until everything else has been said.
        ``queue=True`` makes it wait its turn instead of interrupting.
        """
        c = _c()
        handle = self._utterance(
            text, ssml=False, language=language, voice=voice, rate=rate, pitch=1.0, volume=volume, priority=priority, queue=queue
        )
        ident = self._submit(lambda i: c.parla_speak(self._live(), handle, i), handle)
        return Announcement(self, ident, text)

    def wait(self, utterance: int, timeout: Optional[float] = None) -> str:
        """Waits until ``utterance`` ends and returns how: "finished", "interrupted",
        "dropped" or "failed". Raises :class:`Error` after ``timeout`` seconds."""
        return self._wait_event(utterance, timeout).kind

    def stop(self, at: str = "immediate") -> bool:
        """Stops what is speaking (at once, or at the end of the ``"word"`` being heard) and
        drops everything queued. False if nothing was speaking or queued."""
        stopped = ctypes.c_int()
        _check(_c().parla_stop(self._live(), self._boundary(at), ctypes.byref(stopped)))
        return bool(stopped.value)

    def pause(self, at: str = "immediate") -> None:
        """Pauses what is speaking; queued speech waits."""
        _check(_c().parla_pause(self._live(), self._boundary(at)))

    def resume(self) -> None:
        """Continues paused speech where it stopped."""
        _check(_c().parla_continue(self._live()))

    def set_rate(self, rate: float) -> None:
        """Live rate, 0.25–6: what is speaking changes at once."""
        _check(_c().parla_set_rate(self._live(), float(rate)))

    def set_pitch(self, pitch: float) -> None:
        """Live pitch, 0–2, a multiple of each utterance's: what is speaking changes from its next word."""
        _check(_c().parla_set_pitch(self._live(), float(pitch)))

    def set_volume(self, volume: float) -> None:
        """Live volume, 0–2: a multiple of each utterance's volume, from the next samples sent
        (above 1 a soft limiter keeps the peaks below full scale)."""
        _check(_c().parla_set_volume(self._live(), float(volume)))

    @property
    def is_speaking(self) -> bool:
        """Whether something is speaking or paused."""
        return bool(_c().parla_is_speaking(self._live()) == 1)

    def prepare(self) -> None:
        """Starts the engine and connects to the sound server now (optional): the first
        utterance is then heard sooner."""
        _check(_c().parla_prepare(self._live()))

    def write(
        self,
        text: str,
        path: PathLike,
        *,
        language: Optional[str] = None,
        voice: Optional[str] = None,
        rate: float = 1.0,
        pitch: float = 1.0,
        volume: float = 1.0,
        ssml: bool = False,
        prefer_voices: Optional[Mapping[str, str]] = None,
    ) -> Timeline:
        """Renders ``text`` to a WAV file (written whole, or not at all) and returns its
        words and sentences, with indices into ``text`` and times in seconds."""
        c = _c()
        handle = self._utterance(
            text, ssml=ssml, language=language, voice=voice, rate=rate, pitch=pitch, volume=volume, prefer_voices=prefer_voices
        )
        timeline = ctypes.c_void_p()
        try:
            _check(c.parla_write_wav(self._live(), handle, _encode(os.fspath(path), "path"), ctypes.byref(timeline)))
        finally:
            c.parla_utterance_free(handle)
        try:

            def ranges(count: Callable[[ctypes.c_void_p], int], get: Callable[..., int]) -> list[Word]:
                result = []
                for i in range(count(timeline)):
                    r = _lib.TimedRange()
                    _check(get(timeline, i, ctypes.byref(r)))
                    result.append(
                        Word(
                            text=_decode(r.text) or text[r.scalar_start : r.scalar_end],
                            start=r.scalar_start,
                            end=r.scalar_end,
                            start_time=r.start_ns / 1e9,
                            end_time=r.end_ns / 1e9,
                            language=_decode(r.language),
                            voice=_decode(r.voice),
                            estimated=bool(r.estimated),
                            phonemes=_decode(r.phonemes),
                        )
                    )
                return result

            return Timeline(
                words=ranges(c.parla_timeline_word_count, c.parla_timeline_word),
                sentences=ranges(c.parla_timeline_sentence_count, c.parla_timeline_sentence),
                duration=c.parla_timeline_duration_ns(timeline) / 1e9,
                sample_rate=c.parla_timeline_sample_rate(timeline),
            )
        finally:
            c.parla_timeline_free(timeline)

    def synthesize(
        self,
        text: str,
        *,
        language: Optional[str] = None,
        voice: Optional[str] = None,
        rate: float = 1.0,
        pitch: float = 1.0,
        volume: float = 1.0,
        ssml: bool = False,
        prefer_voices: Optional[Mapping[str, str]] = None,
        for_playback: bool = False,
    ) -> Iterator[Chunk]:
        """Synthesizes ``text`` without playing it: its audio as it is made, and each word,
        sentence and SSML mark once its timing is known (a word may come shortly after its audio).
        Leaving the loop early stops synthesis. With ``for_playback``, for a caller that plays
        the audio as it comes, a Piper voice's first sound comes sooner, as with ``speak`` (a
        short first chunk; a long first sentence as two clauses): not the bytes ``write`` writes."""
        c = _c()
        handle = self._utterance(
            text, ssml=ssml, language=language, voice=voice, rate=rate, pitch=pitch, volume=volume, prefer_voices=prefer_voices
        )
        inbox: "_queue.Queue[object]" = _queue.Queue(maxsize=64)
        stop = threading.Event()
        end = object()
        outcome: dict[str, object] = {}

        def on_chunk(pointer: "ctypes._Pointer[_lib.Chunk]", _user: Optional[int]) -> int:
            try:
                k = pointer.contents
                kind: ChunkKind = _lib.CHUNK_KINDS.get(k.kind, "unknown")
                chunk = Chunk(
                    kind=kind,
                    sample=k.sample,
                    end_sample=k.end_sample,
                    sample_rate=k.sample_rate,
                    samples=ctypes.string_at(k.samples, 2 * k.sample_count) if kind == "audio" and k.samples else None,
                    start=k.scalar_start if k.scalar_start >= 0 else None,
                    end=k.scalar_end if k.scalar_start >= 0 else None,
                    text=_decode(k.text),
                )
                while not stop.is_set():
                    try:
                        inbox.put(chunk, timeout=0.1)
                        break
                    except _queue.Full:
                        continue
                return 1 if stop.is_set() else 0
            except BaseException:  # never unwind into C
                return 1

        callback = _lib.CHUNK_CALLBACK(on_chunk)

        def run() -> None:
            try:
                run_synthesis = c.parla_synthesize_for_playback if for_playback else c.parla_synthesize
                status = run_synthesis(self._live(), handle, callback, None)
                if status != _lib.PARLA_OK:
                    outcome["error"] = _error(_last_error(), status)
            except Error as error:
                outcome["error"] = error
            finally:
                c.parla_utterance_free(handle)
                while True:  # the end mark always gets in, even when the reader has left
                    try:
                        inbox.put(end, timeout=0.1)
                        break
                    except _queue.Full:
                        if stop.is_set():
                            try:
                                inbox.get_nowait()
                            except _queue.Empty:
                                pass

        worker = threading.Thread(target=run, name="parla-synthesize", daemon=True)
        worker.start()
        try:
            while True:
                item = inbox.get()
                if item is end:
                    break
                yield item  # type: ignore[misc]
            error = outcome.get("error")
            if isinstance(error, Error):
                raise error
        finally:
            # A callback blocked on the full queue sees the stop as soon as there is room.
            stop.set()
            while worker.is_alive():
                try:
                    inbox.get_nowait()
                except _queue.Empty:
                    pass
                worker.join(0.001)

    # MARK: Events

    def on_event(self, callback: Callable[[Event], None]) -> None:
        """Calls ``callback(event)`` for every event of every utterance, on Parla's event
        thread (keep it short; it must not call :meth:`wait` or :meth:`close`)."""
        with self._condition:
            self._subscribers.append(callback)

    def events(self, utterance: Optional[int] = None, timeout: Optional[float] = None) -> Iterator[Event]:
        """Events as an iterator: of ``utterance`` only (those it already had first, and
        ending with its terminal event), or of everything from now on. ``timeout``: raise
        :class:`Error` if no event comes for that many seconds."""
        inbox: "_queue.SimpleQueue[Event]" = _queue.SimpleQueue()
        with self._condition:
            past = list(self._utterances[utterance].events) if utterance is not None and utterance in self._utterances else []
            self._subscribers.append(inbox.put)
        return self._iterate(inbox, past, utterance, timeout)

    def _iterate(self, inbox: "_queue.SimpleQueue[Event]", past: list[Event], utterance: Optional[int], timeout: Optional[float]) -> Iterator[Event]:
        try:
            for event in past:
                yield event
                if event.is_terminal:
                    return
            while True:
                try:
                    event = inbox.get(timeout=timeout)
                except _queue.Empty:
                    raise TimeoutError(f"no event for {timeout} s", _lib.TIMEOUT) from None
                if utterance is not None and event.utterance != utterance:
                    continue
                yield event
                if utterance is not None and event.is_terminal:
                    return
        finally:
            with self._condition:
                if inbox.put in self._subscribers:
                    self._subscribers.remove(inbox.put)

    async def aevents(self, utterance: Optional[int] = None):  # type: ignore[no-untyped-def]
        """Events as an asynchronous iterator (``async for event in synth.aevents(id)``),
        delivered on the running event loop."""
        loop = asyncio.get_running_loop()
        inbox: "asyncio.Queue[Event]" = asyncio.Queue()

        def put(event: Event) -> None:
            loop.call_soon_threadsafe(inbox.put_nowait, event)

        with self._condition:
            past = list(self._utterances[utterance].events) if utterance is not None and utterance in self._utterances else []
            self._subscribers.append(put)
        try:
            for event in past:
                yield event
                if event.is_terminal:
                    return
            while True:
                event = await inbox.get()
                if utterance is not None and event.utterance != utterance:
                    continue
                yield event
                if utterance is not None and event.is_terminal:
                    return
        finally:
            with self._condition:
                if put in self._subscribers:
                    self._subscribers.remove(put)

    # MARK: Lifetime

    @staticmethod
    def _boundary(at: str) -> int:
        if at not in _lib.BOUNDARIES:
            raise InvalidArgumentError(f"at must be 'immediate' or 'word', not {at!r}")
        return _lib.BOUNDARIES[at]

    def close(self) -> None:
        """Stops this synthesizer's speech at once and releases it."""
        handle, self._handle = self._handle, None
        if handle is not None and _library is not None:
            # No event reaches Python while (or after) it closes: at the interpreter's exit, a
            # callback from Parla's event thread could not take the GIL again.
            _library.parla_set_event_callback(handle, _lib.CALLBACK(), None)  # NULL: no callback
            _library.parla_synthesizer_free(handle)
            # Closing cut off what was speaking and dropped what was queued: a wait() or
            # events() on another thread ends with it.
            with self._condition:
                unended = [(u, r) for u, r in self._utterances.items() if r.ended is None]
            for u, record in unended:
                started = any(e.kind == "started" for e in record.events)
                self._dispatch(Event(kind="interrupted" if started else "dropped", utterance=u, time=_time.monotonic()))

    def __enter__(self) -> "Synthesizer":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# Batch rendering (parla render, from Python); imported last: it uses the errors above.
from .batch import MergeReport, RenderResult, merge, render  # noqa: E402
