"""ctypes declarations of libparla (parla.h): loaded once, from the wheel or the system."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path
from typing import Literal

EventKind = Literal[
    "started", "word", "sentence", "mark", "resumed", "paused", "continued", "finished", "interrupted", "dropped", "failed", "unknown"
]
ChunkKind = Literal["audio", "word", "sentence", "mark", "unknown"]

PARLA_OK = 0

# parla_status, by its name in parla.h without PARLA_ERROR_ (scripts/check_c_mirror.py
# compares these numbers, the enums below and the structs' layouts with the header).
STATUS = {
    "invalid_argument": 1,
    "invalid_handle": 2,
    "invalid_utf8": 3,
    "out_of_range": 4,
    "unknown_voice": 5,
    "unknown_language": 6,
    "ssml": 7,
    "audio": 8,
    "engine": 9,
    "io": 10,
    "timeout": 11,
    "failed": 12,
}

# parla_event_kind
EVENT_KINDS: "dict[int, EventKind]" = {
    1: "started",
    2: "word",
    3: "sentence",
    4: "mark",
    5: "resumed",
    6: "paused",
    7: "continued",
    8: "finished",
    9: "interrupted",
    10: "dropped",
    11: "failed",
}
TERMINAL: "frozenset[EventKind]" = frozenset({"finished", "interrupted", "dropped", "failed"})
PRIORITIES = {"none": 0, "low": 1, "default": 2, "high": 3}
BOUNDARIES = {"immediate": 0, "word": 1}
TIMEOUT = STATUS["timeout"]


class _Sized(ctypes.Structure):
    """A struct of parla.h that begins with its size: set here, as the header asks."""

    def __init__(self) -> None:
        super().__init__()
        self.size = ctypes.sizeof(self)


class Event(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("utterance", ctypes.c_uint64),
        ("time_ns", ctypes.c_int64),
        ("byte_start", ctypes.c_int64),
        ("byte_end", ctypes.c_int64),
        ("scalar_start", ctypes.c_int64),
        ("scalar_end", ctypes.c_int64),
        ("audio_ns", ctypes.c_int64),
        ("text", ctypes.c_char_p),
        ("mark", ctypes.c_char_p),
        ("error", ctypes.c_char_p),
        ("announcement_heard", ctypes.c_int),
    ]


class TimedRange(_Sized):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("byte_start", ctypes.c_int64),
        ("byte_end", ctypes.c_int64),
        ("scalar_start", ctypes.c_int64),
        ("scalar_end", ctypes.c_int64),
        ("start_ns", ctypes.c_int64),
        ("end_ns", ctypes.c_int64),
        ("text", ctypes.c_char_p),
        ("language", ctypes.c_char_p),
        ("voice", ctypes.c_char_p),
        ("estimated", ctypes.c_int),
        ("phonemes", ctypes.c_char_p),
    ]


class Voice(_Sized):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("identifier", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("engine", ctypes.c_char_p),
        ("languages", ctypes.c_char_p),
        ("quality", ctypes.c_char_p),
        ("sample_rate", ctypes.c_int),
    ]


class Segment(_Sized):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("byte_start", ctypes.c_int64),
        ("byte_end", ctypes.c_int64),
        ("scalar_start", ctypes.c_int64),
        ("scalar_end", ctypes.c_int64),
        ("language", ctypes.c_char_p),
        ("confidence", ctypes.c_double),
    ]


class Chunk(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("samples", ctypes.c_void_p),
        ("sample_count", ctypes.c_size_t),
        ("sample", ctypes.c_int64),
        ("end_sample", ctypes.c_int64),
        ("sample_rate", ctypes.c_int),
        ("byte_start", ctypes.c_int64),
        ("byte_end", ctypes.c_int64),
        ("scalar_start", ctypes.c_int64),
        ("scalar_end", ctypes.c_int64),
        ("text", ctypes.c_char_p),
    ]


CHUNK_KINDS: "dict[int, ChunkKind]" = {1: "audio", 2: "word", 3: "sentence", 4: "mark"}

CALLBACK = ctypes.CFUNCTYPE(None, ctypes.POINTER(Event), ctypes.c_void_p)
CHUNK_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Chunk), ctypes.c_void_p)
# parla_install_progress: file, bytes so far, its size, user data.
INSTALL_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)

_p = ctypes.c_void_p
_s = ctypes.c_char_p
_i = ctypes.c_int
_d = ctypes.c_double
_u64p = ctypes.POINTER(ctypes.c_uint64)

# name: (result, arguments)
_SIGNATURES = {
    "parla_version": (_s, []),
    "parla_last_error": (_s, []),
    "parla_last_status": (_i, []),
    "parla_status_string": (ctypes.c_char_p, [_i]),
    "parla_utterance_new": (_p, [_s]),
    "parla_utterance_new_ssml": (_p, [_s]),
    "parla_utterance_free": (None, [_p]),
    "parla_utterance_set_language": (_i, [_p, _s]),
    "parla_utterance_set_voice": (_i, [_p, _s]),
    "parla_utterance_prefer_voice": (_i, [_p, _s, _s]),
    "parla_utterance_set_rate": (_i, [_p, _d]),
    "parla_utterance_set_pitch": (_i, [_p, _d]),
    "parla_utterance_set_volume": (_i, [_p, _d]),
    "parla_utterance_set_resumes_after_interruption": (_i, [_p, _i]),
    "parla_utterance_set_announcement": (_i, [_p, _i, _i]),
    "parla_synthesizer_new": (_p, [_s]),
    "parla_synthesizer_free": (None, [_p]),
    "parla_set_event_callback": (_i, [_p, CALLBACK, _p]),
    "parla_prepare": (_i, [_p]),
    "parla_speak": (_i, [_p, _p, _u64p]),
    "parla_speak_text": (_i, [_p, _s, _u64p]),
    "parla_announce": (_i, [_p, _s, _i, _i, _u64p]),
    "parla_wait": (_i, [_p, ctypes.c_uint64, ctypes.c_int64, ctypes.POINTER(_i)]),
    "parla_stop": (_i, [_p, _i, ctypes.POINTER(_i)]),
    "parla_pause": (_i, [_p, _i]),
    "parla_continue": (_i, [_p]),
    "parla_set_rate": (_i, [_p, _d]),
    "parla_set_pitch": (_i, [_p, _d]),
    "parla_set_volume": (_i, [_p, _d]),
    "parla_is_speaking": (_i, [_p]),
    "parla_write_wav": (_i, [_p, _p, _s, ctypes.POINTER(_p)]),
    "parla_synthesize": (_i, [_p, _p, CHUNK_CALLBACK, _p]),
    "parla_synthesize_for_playback": (_i, [_p, _p, CHUNK_CALLBACK, _p]),
    "parla_timeline_word_count": (ctypes.c_size_t, [_p]),
    "parla_timeline_sentence_count": (ctypes.c_size_t, [_p]),
    "parla_timeline_word": (_i, [_p, ctypes.c_size_t, ctypes.POINTER(TimedRange)]),
    "parla_timeline_sentence": (_i, [_p, ctypes.c_size_t, ctypes.POINTER(TimedRange)]),
    "parla_timeline_duration_ns": (ctypes.c_int64, [_p]),
    "parla_timeline_sample_rate": (_i, [_p]),
    "parla_timeline_free": (None, [_p]),
    "parla_voices": (_i, [ctypes.POINTER(_p)]),
    "parla_voice_list_count": (ctypes.c_size_t, [_p]),
    "parla_voice_list_get": (_i, [_p, ctypes.c_size_t, ctypes.POINTER(Voice)]),
    "parla_voice_list_free": (None, [_p]),
    "parla_detect": (_i, [_s, ctypes.POINTER(_p)]),
    "parla_segment_list_count": (ctypes.c_size_t, [_p]),
    "parla_segment_list_get": (_i, [_p, ctypes.c_size_t, ctypes.POINTER(Segment)]),
    "parla_segment_list_free": (None, [_p]),
    "parla_install_voice": (_i, [_s, _s, INSTALL_PROGRESS, _p]),
    "parla_remove_voice": (_i, [_s]),
}


def _candidates() -> list[str]:
    places = []
    if os.environ.get("PARLA_LIBRARY"):
        places.append(os.environ["PARLA_LIBRARY"])
    bundled = Path(__file__).with_name("_native") / "libparla.so.0"
    if bundled.exists():
        places.append(str(bundled))
    places.append("libparla.so.0")
    found = ctypes.util.find_library("parla")
    if found:
        places.append(found)
    for prefix in (Path.home() / ".local", Path("/usr/local"), Path("/usr")):
        places.append(str(prefix / "lib" / "libparla.so.0"))
    return places


def load() -> ctypes.CDLL:
    """Opens libparla and declares its functions; OSError saying where it looked if it cannot."""
    tried = []
    for place in _candidates():
        try:
            library = ctypes.CDLL(place)
        except OSError as error:
            tried.append(f"{place} ({error})")
            continue
        for name, (result, arguments) in _SIGNATURES.items():
            function = getattr(library, name)
            function.restype = result
            function.argtypes = arguments
        return library
    raise OSError(
        "libparla.so.0 was not found. Install Parla (scripts/install or its .deb), install the parla "
        "wheel that carries it, or set PARLA_LIBRARY to its path. Tried: " + "; ".join(tried)
    )
