"""Parla as a Spiel speech provider: ``org.parla.Speech.Provider`` on the session bus, which
implements ``org.freedesktop.Speech.Provider`` (project-spiel/libspeechprovider).

    python3 -m parla.speech_provider        (D-Bus activation starts it: see --service-file)

Every Parla voice is offered, and ``parla.auto``, which switches language inside one text
by detection. ``Synthesize`` returns at once; the audio and its word and sentence events are
written to the caller's pipe in Spiel's framed format as they are made, each event where its
audio starts, and SSML marks where they are reached. Closing the pipe stops the work. The
voice list follows voices being added or removed (PropertiesChanged). Needs PyGObject
(Debian: python3-gi).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from typing import Any, Optional

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

import parla  # noqa: E402

BUS_NAME = "org.parla.Speech.Provider"
OBJECT_PATH = "/org/parla/Speech/Provider"
INTERFACE = "org.freedesktop.Speech.Provider"
AUTO = "parla.auto"
FORMAT = "audio/x-spiel,format=S16LE,channels=1,rate=22050"

# Spiel's rates run from 0.1 to 10, 1 being the voice's normal speed (175 words a minute). As
# sd_parla maps speech-dispatcher's -100..100, each side is linear: 0.1 is Parla's slowest (80
# words a minute) and 10 the fastest, $PARLA_MAX_RATE (175-1000, default 450 as speech-dispatcher's).
DEFAULT_MAX_RATE = 450.0


def max_rate_from(text: str | None) -> float:
    """The words per minute of Spiel's rate 10, from $PARLA_MAX_RATE's text (default 450)."""
    try:
        value = float(text) if text else DEFAULT_MAX_RATE
    except ValueError:
        value = DEFAULT_MAX_RATE
    return value if 175 <= value <= 1000 else DEFAULT_MAX_RATE


MAX_RATE = max_rate_from(os.environ.get("PARLA_MAX_RATE"))


def words_per_minute(rate: float, most: float = DEFAULT_MAX_RATE) -> float:
    """Words per minute for a Spiel rate (0.1-10, clamped; 1 is 175)."""
    rate = min(max(rate, 0.1), 10.0)
    if rate <= 1:
        return 80 + (rate - 0.1) / 0.9 * (175 - 80)
    return 175 + (rate - 1) / 9 * (most - 175)
# What every Parla voice honours: word and sentence events with ranges, SSML marks; SSML
# breaks, prosody, sentences and paragraphs.
EVENTS_WORD, EVENTS_SENTENCE, EVENTS_SSML_MARK = 0x1, 0x2, 0x8
SSML_BREAK, SSML_PROSODY, SSML_SENTENCE_PARAGRAPH = 0x1000, 0x10000, 0x20000
FEATURES = EVENTS_WORD | EVENTS_SENTENCE | EVENTS_SSML_MARK | SSML_BREAK | SSML_PROSODY | SSML_SENTENCE_PARAGRAPH
EVENT_KINDS = {"word": 1, "sentence": 2, "mark": 4}

INTROSPECTION = f"""
<node>
  <interface name="{INTERFACE}">
    <method name="Synthesize">
      <arg direction="in" type="h" name="pipe_fd"/>
      <arg direction="in" type="s" name="text"/>
      <arg direction="in" type="s" name="voice_id"/>
      <arg direction="in" type="d" name="pitch"/>
      <arg direction="in" type="d" name="rate"/>
      <arg direction="in" type="b" name="is_ssml"/>
      <arg direction="in" type="s" name="language"/>
    </method>
    <property name="Name" type="s" access="read"/>
    <property name="Voices" type="a(ssstas)" access="read"/>
  </interface>
</node>
"""


class Stream:
    """Spiel's framed stream on a pipe: the header, then audio and events. Each event is
    written just where its audio starts, so audio is held back until the events at its start
    are known:
    - words may come shortly after their audio, so audio waits for the next event;
    - a sentence comes once it has been spoken (Parla knows its range then), so the audio
      and events past the last sentence known wait for the next sentence (at most
      ``MAX_HELD_SECONDS`` of audio: a sentence longer than that is announced late);
    - an event that comes early waits for its audio."""

    MAX_HELD_SECONDS = 30
    ORDER = {EVENT_KINDS["sentence"]: 0, EVENT_KINDS["mark"]: 1, EVENT_KINDS["word"]: 2}  # at one sample

    def __init__(self, fd: int) -> None:
        self.file = os.fdopen(fd, "wb", buffering=0)
        self.file.write(b"0.01")
        self.pending = bytearray()
        self.pending_start = 0  # the sample index of pending[0]
        self.events: list[tuple[int, int, int, int, bytes]] = []  # (sample, kind, start, end, mark name), in order
        self.sentences_until = 0  # where the last sentence known ends: a later one starts there or after
        self.rate = 22050

    def audio(self, sample: int, data: bytes, rate: int = 22050) -> None:
        if not self.pending:
            self.pending_start = sample
        self.pending += data
        self.rate = rate
        self._flush()

    def event(self, kind: int, sample: int, start: int, end: int, name: str = "", end_sample: int = 0) -> None:
        if kind == EVENT_KINDS["sentence"]:
            self.sentences_until = max(self.sentences_until, end_sample)
        # An event reaches the pipe whole too (at most 4096 bytes): a longer mark name is cut.
        encoded = name.encode()[:4000].decode("utf-8", "ignore").encode()
        self.events.append((sample, kind, start, end, encoded))
        # A sentence, then a mark, then the word, where they share a sample.
        self.events.sort(key=lambda e: (e[0], self.ORDER.get(e[1], 1)))
        self._flush()

    def finish(self) -> None:
        self.sentences_until = sys.maxsize  # every sentence is known now
        self._flush()
        if self.pending:
            self._write_audio(bytes(self.pending))
            self.pending.clear()
        for _, kind, start, end, name in self.events:  # at or past the audio's end: marks after the last word
            self._write_event(kind, start, end, name)
        self.file.close()

    def _flush(self) -> None:
        while self.events:
            sample, kind, start, end, name = self.events[0]
            if sample > self.pending_start + len(self.pending) // 2:
                return  # its audio has not come yet
            held_too_long = len(self.pending) // 2 > self.MAX_HELD_SECONDS * self.rate
            if kind != EVENT_KINDS["sentence"] and sample >= self.sentences_until and not held_too_long:
                return  # a sentence not yet known may start before it
            cut = max(0, 2 * (sample - self.pending_start))
            if cut:
                self._write_audio(bytes(self.pending[:cut]))
                del self.pending[:cut]
                self.pending_start += cut // 2
            self._write_event(kind, start, end, name)
            self.events.pop(0)

    # A write of at most PIPE_BUF (4096) bytes reaches the pipe whole. libspeechprovider's
    # reader (libspiel) reads a chunk's samples with a single read(), so a larger chunk can
    # be cut short and the rest taken for the next chunk's header: audio goes out in chunks
    # of at most 4096 bytes with their header.
    AUDIO_PER_WRITE = 4096 - 5

    def _write_audio(self, data: bytes) -> None:
        step = self.AUDIO_PER_WRITE & ~1  # whole samples
        for at in range(0, len(data), step):
            piece = data[at : at + step]
            self.file.write(struct.pack("<BI", 1, len(piece)) + piece)

    def _write_event(self, kind: int, start: int, end: int, name: bytes) -> None:
        # The name's length in bytes: what libspeechprovider's reader reads.
        self.file.write(struct.pack("<BBIII", 2, kind, start, end, len(name)) + name)


class Provider:
    def __init__(self, idle_seconds: float) -> None:
        self.synth = parla.Synthesizer()
        self.voices = parla.voices()
        self.by_id = {v.identifier: v for v in self.voices}
        self.connection: Optional[Gio.DBusConnection] = None
        self.active = 0
        self.lock = threading.Lock()
        self.idle_seconds = idle_seconds
        self.idle_source = 0
        self.loop = GLib.MainLoop()

    # MARK: D-Bus

    @staticmethod
    def features(engine: str) -> int:
        # A Piper voice's pitch needs libsonic (the wheel carries it, Debian's libsonic0
        # elsewhere): <prosody pitch> may not be honoured, so SSML_PROSODY is not claimed (rate
        # and volume are).
        return FEATURES & ~SSML_PROSODY if engine == "piper" else FEATURES

    def voices_variant(self) -> GLib.Variant:
        languages = sorted({lang for v in self.voices for lang in v.languages})
        # parla.auto may speak a language with a Piper voice, where one is installed.
        auto = FEATURES
        for v in self.voices:
            auto &= self.features(v.engine)
        rows = [("Parla (detects the language)", AUTO, FORMAT, auto, languages)]
        rows += [(v.name, v.identifier, FORMAT, self.features(v.engine), v.languages) for v in self.voices]
        return GLib.Variant("a(ssstas)", rows)

    def refresh_voices(self) -> bool:
        """Looks for voices added or removed (Parla reads its Piper directories again only
        when one has changed), and announces a new list with PropertiesChanged."""
        try:
            voices = parla.voices()
        except parla.Error:
            return True
        if [(v.identifier, v.languages) for v in voices] != [(v.identifier, v.languages) for v in self.voices]:
            self.voices = voices
            self.by_id = {v.identifier: v for v in voices}
            if self.connection is not None:
                changed = GLib.Variant("(sa{sv}as)", (INTERFACE, {"Voices": self.voices_variant()}, []))
                self.connection.emit_signal(None, OBJECT_PATH, "org.freedesktop.DBus.Properties", "PropertiesChanged", changed)
        return True

    def get_property(self, _connection, _sender, _path, _interface, name):  # type: ignore[no-untyped-def]
        self.touch()
        if name == "Name":
            return GLib.Variant("s", "Parla")
        if name == "Voices":
            return self.voices_variant()
        return None

    def method_call(self, _connection, _sender, _path, _interface, method, parameters, invocation):  # type: ignore[no-untyped-def]
        self.touch()
        if method != "Synthesize":
            invocation.return_dbus_error("org.freedesktop.DBus.Error.UnknownMethod", f"no method {method}")
            return
        index, text, voice_id, pitch, rate, is_ssml, language = parameters.unpack()
        # Taken out of the message: a copy left in its list would keep the pipe open after
        # the stream is closed, and the client would never see its end.
        fds = invocation.get_message().get_unix_fd_list()
        owned = list(fds.steal_fds()) if fds is not None else []
        fd = owned.pop(index) if 0 <= index < len(owned) else -1
        for other in owned:
            os.close(other)
        if fd < 0:
            invocation.return_dbus_error("org.freedesktop.DBus.Error.InvalidArgs", "pipe_fd is not a file descriptor")
            return
        try:
            settings = self.settings(text, voice_id, pitch, rate, is_ssml, language)
        except parla.Error as error:
            os.close(fd)
            invocation.return_dbus_error("org.freedesktop.DBus.Error.InvalidArgs", str(error))
            return
        with self.lock:
            self.active += 1
        # Returns at once; the work goes on in a thread of its own (requests do not wait for
        # one another).
        threading.Thread(target=self.synthesize, args=(fd, text, settings), daemon=True).start()
        invocation.return_value(None)

    def settings(self, text: str, voice_id: str, pitch: float, rate: float, is_ssml: bool, language: str) -> dict[str, Any]:
        if voice_id and voice_id != AUTO and voice_id not in self.by_id:
            self.refresh_voices()  # installed a moment ago?
        if voice_id and voice_id != AUTO and voice_id not in self.by_id:
            raise parla.Error(f"no voice '{voice_id}' in Parla (the Voices property lists them; '{AUTO}' detects the language)")
        voice = self.by_id.get(voice_id)
        settings: dict[str, Any] = {
            "ssml": bool(is_ssml),
            "rate": words_per_minute(rate or 1.0, MAX_RATE) / 175,
            "pitch": min(max(pitch if pitch >= 0 else 1.0, 0.0), 2.0),
            "voice": voice.identifier if voice else None,
            # A chosen voice speaks the whole text in its language; parla.auto detects.
            "language": (language or None) if voice is None else (voice.languages[0] if voice.languages else None),
        }
        # Checked now, so that a bad language or bad SSML is the call's error.
        handle = self.synth._utterance(text, volume=1.0, **settings)
        parla._c().parla_utterance_free(handle)
        return settings

    # MARK: The work

    def synthesize(self, fd: int, text: str, settings: dict[str, Any]) -> None:
        stream: Optional[Stream] = None
        try:
            stream = Stream(fd)
            # Its client plays the audio as it comes: made as live speech is.
            for chunk in self.synth.synthesize(text, for_playback=True, **settings):
                if chunk.kind == "audio" and chunk.samples:
                    stream.audio(chunk.sample, chunk.samples, chunk.sample_rate)
                elif chunk.kind in EVENT_KINDS and chunk.start is not None and chunk.end is not None:
                    name = (chunk.text or "") if chunk.kind == "mark" else ""
                    stream.event(EVENT_KINDS[chunk.kind], chunk.sample, chunk.start, chunk.end, name, chunk.end_sample)
            stream.finish()
        except (BrokenPipeError, OSError, parla.Error):
            pass  # the client closed the pipe (leaving the loop stopped synthesis), or it failed
        finally:
            if stream is not None:
                try:
                    stream.file.close()
                except OSError:
                    pass
            with self.lock:
                self.active -= 1
            log = os.environ.get("PARLA_PROVIDER_LOG")  # for scripts/bench-spiel: when each request's work ended
            if log:
                with open(log, "a") as f:
                    f.write(f"{time.monotonic_ns()} ended\n")
            GLib.idle_add(self.touch)

    # MARK: Idle exit

    def touch(self) -> bool:
        if self.idle_source:
            GLib.source_remove(self.idle_source)
        self.idle_source = GLib.timeout_add(int(self.idle_seconds * 1000), self.idle)
        return False

    def idle(self) -> bool:
        with self.lock:
            busy = self.active > 0
        if busy:
            return True
        self.loop.quit()
        return False


def service_file(python: str = sys.executable) -> str:
    """The D-Bus activation file that starts this provider with ``python``."""
    return f"[D-BUS Service]\nName={BUS_NAME}\nExec={python} -m parla.speech_provider\n"


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog=os.path.basename(sys.argv[0]) if not sys.argv[0].endswith(".py") else "python3 -m parla.speech_provider",
        description="Parla's Spiel speech provider: serves org.parla.Speech.Provider on the session bus until idle "
        "(PARLA_PROVIDER_IDLE_SECONDS, default 60). D-Bus activation starts it; Spiel clients (Orca, WebKit, spiel) find it "
        "by its name.",
    )
    parser.add_argument("--service-file", action="store_true",
                        help="print the D-Bus activation file that starts this provider with this Python, and exit")
    args = parser.parse_args()
    if args.service_file:
        sys.stdout.write(service_file())
        return 0
    provider = Provider(float(os.environ.get("PARLA_PROVIDER_IDLE_SECONDS", "60")))
    node = Gio.DBusNodeInfo.new_for_xml(INTROSPECTION)
    connection = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    connection.register_object(OBJECT_PATH, node.interfaces[0], provider.method_call, provider.get_property, None)
    provider.connection = connection
    GLib.timeout_add(int(float(os.environ.get("PARLA_PROVIDER_VOICE_POLL_SECONDS", "1")) * 1000), provider.refresh_voices)

    def lost(*_: object) -> None:
        provider.loop.quit()

    Gio.bus_own_name_on_connection(connection, BUS_NAME, Gio.BusNameOwnerFlags.NONE, None, lost)
    provider.touch()
    provider.loop.run()
    provider.synth.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
