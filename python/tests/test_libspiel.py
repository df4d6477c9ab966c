"""The provider driven by libspiel itself (project-spiel/libspiel: the library Orca and WebKit
speak through), through its GObject introspection, on the private session bus of
test_speech_provider with D-Bus activation. scripts/check-spiel builds libspiel and runs
this; elsewhere it is skipped (Debian 12 has no libspiel)."""

from __future__ import annotations

import os

import pytest

gi = pytest.importorskip("gi")
try:
    gi.require_version("Spiel", "1.0")
    gi.require_version("Gst", "1.0")
except ValueError:
    pytest.skip("libspiel's typelib is not installed (scripts/check-spiel builds it)", allow_module_level=True)
from gi.repository import GLib, Gst, Spiel  # noqa: E402

from parla import speech_provider as sp  # noqa: E402
from test_speech_provider import bus, reference  # noqa: E402,F401  (the private bus, Parla's own rendering)


@pytest.fixture(scope="module")
def speaker(bus):  # noqa: F811
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = bus.address  # libspiel finds providers on the session bus
    Gst.init(None)
    return Spiel.Speaker.new_sync(None)


def speak(speaker, tmp_path, text, voice_id, ssml=False):
    """Speaks through libspiel into a file; returns the audio and the signals, in order."""
    voice = next(v for v in speaker.props.voices
                 if v.props.identifier == voice_id and v.props.provider.props.identifier == sp.BUS_NAME)
    sink = Gst.ElementFactory.make("filesink", None)
    sink.set_property("location", str(tmp_path / "spiel.raw"))
    speaker.props.sink = sink
    loop, signals = GLib.MainLoop(), []
    handlers = [
        speaker.connect("word-started", lambda _s, _u, a, b: signals.append(("word", a, b))),
        speaker.connect("sentence-started", lambda _s, _u, a, b: signals.append(("sentence", a, b))),
        speaker.connect("mark-reached", lambda _s, _u, name: signals.append(("mark", name))),
        speaker.connect("utterance-finished", lambda *_: (signals.append(("finished",)), loop.quit())),
        speaker.connect("utterance-error", lambda _s, _u, e: (signals.append(("error", e.message)), loop.quit())),
    ]
    GLib.timeout_add_seconds(60, loop.quit)
    speaker.speak(Spiel.Utterance(text=text, voice=voice, is_ssml=ssml))
    loop.run()
    for h in handlers:
        speaker.disconnect(h)
    speaker.props.sink = Gst.ElementFactory.make("fakesink", None)  # closes the file
    return (tmp_path / "spiel.raw").read_bytes(), signals


def test_libspiel_lists_parla_and_its_features(speaker):
    providers = [p.props.identifier for p in speaker.props.providers]
    assert sp.BUS_NAME in providers
    voices = {v.props.identifier: v for v in speaker.props.voices if v.props.provider.props.identifier == sp.BUS_NAME}
    assert "parla.auto" in voices and "espeak-ng.el" in voices
    features = voices["espeak-ng.en-us"].props.features
    for flag in (Spiel.VoiceFeature.EVENTS_WORD, Spiel.VoiceFeature.EVENTS_SENTENCE, Spiel.VoiceFeature.EVENTS_SSML_MARK):
        assert features & flag


def test_libspiel_hears_the_audio_with_words_and_sentences_in_place(speaker, tmp_path):
    text = "Hello there, my friend. How are you today?"
    audio, signals = speak(speaker, tmp_path, text, "espeak-ng.en-us")
    expected, timeline = reference(tmp_path, text, voice="espeak-ng.en-us", language="en-US")
    assert signals[-1] == ("finished",)
    assert audio == expected  # every sample, none lost or added on the way through GStreamer
    assert [(a, b) for kind, a, b in signals[:-1] if kind == "word"] == [(w.start, w.end) for w in timeline.words]
    # Each sentence is announced just before its first word.
    kinds = [s[0] for s in signals]
    assert kinds[0] == "sentence" and kinds[kinds.index("sentence", 1) - 1] == "word"
    second = signals[kinds.index("sentence", 1)]
    assert text[second[1] : second[2]] == "How are you today?" and signals[kinds.index("sentence", 1) + 1][1] == second[1]


def test_libspiel_with_parla_auto_switches_language(speaker, tmp_path):
    text = "The revolutionary phone. Το επαναστατικό τηλέφωνο. هاتف ثوري."
    audio, signals = speak(speaker, tmp_path, text, "parla.auto")
    assert signals[-1] == ("finished",) and len(audio) > 22050 * 2
    words = [text[a:b] for kind, a, b in (s for s in signals if s[0] == "word")]
    assert words == ["The", "revolutionary", "phone", "Το", "επαναστατικό", "τηλέφωνο", "هاتف", "ثوري"]


def test_libspiel_reaches_marks_between_the_words(speaker, tmp_path):
    ssml = '<speak>Hello <mark name="m1"/>big world.<mark name="end"/></speak>'
    _, signals = speak(speaker, tmp_path, ssml, "espeak-ng.en-us", ssml=True)
    kinds = [s[0] for s in signals]
    assert kinds == ["sentence", "word", "mark", "word", "word", "mark", "finished"], signals
    # (libspiel 1.0.5 hands its mark-reached handlers no name: its source posts "mark_name",
    # its speaker reads "name". The names are on the wire: test_speech_provider checks them.)
