"""parla.speech_provider through a private session bus, with D-Bus activation, as a Spiel
client calls it (scripts/check-python runs this with Debian's PyGObject)."""

from __future__ import annotations

import os
import struct
import subprocess
import threading
import time

import pytest

gi = pytest.importorskip("gi")
gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

import parla  # noqa: E402
from parla import speech_provider as sp  # noqa: E402


@pytest.fixture(scope="module")
def bus(tmp_path_factory):
    d = tmp_path_factory.mktemp("bus")
    (d / "services").mkdir()
    (d / "services" / f"{sp.BUS_NAME}.service").write_text(sp.service_file())
    address = f"unix:path={d}/socket"
    (d / "session.conf").write_text(
        f"""<busconfig><type>session</type><listen>{address}</listen><servicedir>{d}/services</servicedir>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>"""
    )
    (d / "piper").mkdir()  # where test_the_voice_list_follows_voices_added_and_removed installs one
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address, PARLA_PROVIDER_IDLE_SECONDS="2", PARLA_PIPER_VOICES=str(d / "piper"))
    daemon = subprocess.Popen(["dbus-daemon", "--config-file", str(d / "session.conf"), "--nofork"], env=env)
    for _ in range(100):
        if (d / "socket").exists():
            break
        time.sleep(0.05)
    connection = Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None
    )
    connection.piper_directory = d / "piper"
    connection.address = address
    yield connection
    connection.close_sync(None)
    daemon.terminate()
    daemon.wait()


def call(bus, text, voice="espeak-ng.en-us", rate=1.0, pitch=1.0, ssml=False, language="", read=True):
    r, w = os.pipe()
    fds = Gio.UnixFDList.new()
    index = fds.append(w)
    os.close(w)
    bus.call_with_unix_fd_list_sync(
        sp.BUS_NAME, sp.OBJECT_PATH, sp.INTERFACE, "Synthesize",
        GLib.Variant("(hssddbs)", (index, text, voice, pitch, rate, ssml, language)),
        None, Gio.DBusCallFlags.NONE, 30000, fds, None,
    )
    for copy in fds.steal_fds():  # the list's copy of the write end, or the pipe never ends
        os.close(copy)
    if not read:
        return r
    with os.fdopen(r, "rb") as f:
        return f.read()


def parse(data):
    """The header, then (audio bytes before it, event) for each event, and all the audio."""
    assert data[:4] == b"0.01"
    at, audio, events = 4, bytearray(), []
    while at < len(data):
        kind = data[at]
        if kind == 1:
            (n,) = struct.unpack_from("<I", data, at + 1)
            audio += data[at + 5 : at + 5 + n]
            at += 5 + n
        elif kind == 2:
            event, start, end, mark = struct.unpack_from("<BIII", data, at + 1)
            name = data[at + 14 : at + 14 + mark].decode()
            events.append((len(audio) // 2, event, start, end) + ((name,) if event == 4 else ()))
            at += 14 + mark
        else:
            raise AssertionError(f"unknown chunk type {kind} at byte {at}")
    return bytes(audio), events


def reference(tmp_path, text, **settings):
    with parla.Synthesizer() as synth:
        timeline = synth.write(text, tmp_path / "ref.wav", **settings)
    return (tmp_path / "ref.wav").read_bytes()[44:], timeline


def test_spiel_rates_map_as_speech_dispatchers_do():
    # 1 is 175 words a minute, 0.1 the slowest (80), 10 the fastest: PARLA_MAX_RATE, 450 by default.
    assert sp.words_per_minute(1.0) == 175
    assert sp.words_per_minute(0.1) == 80
    assert sp.words_per_minute(10.0) == 450
    assert sp.words_per_minute(10.0, 1000) == 1000
    assert sp.words_per_minute(5.5, 1000) == 587.5
    assert sp.words_per_minute(50.0, 1000) == 1000  # clamped
    assert sp.max_rate_from("800") == 800
    assert sp.max_rate_from("2000") == sp.max_rate_from("fast") == sp.max_rate_from(None) == 450


def test_properties(bus):
    def get(name):
        return bus.call_sync(sp.BUS_NAME, sp.OBJECT_PATH, "org.freedesktop.DBus.Properties", "Get",
                             GLib.Variant("(ss)", (sp.INTERFACE, name)), None, Gio.DBusCallFlags.NONE, 30000, None).unpack()[0]

    assert get("Name") == "Parla"
    voices = get("Voices")
    ids = [v[1] for v in voices]
    assert ids[0] == "parla.auto" and "espeak-ng.en-us" in ids and len(ids) > 50
    assert all(v[2] == sp.FORMAT and v[3] & 0xB == 0xB and v[4] for v in voices)  # word, sentence, mark events


def test_a_voice_streams_its_audio_with_words_where_they_start(bus, tmp_path):
    text = "Hello there, my friend. How are you today?"
    audio, events = parse(call(bus, text))
    voice = next(v for v in parla.voices() if v.identifier == "espeak-ng.en-us")
    expected, timeline = reference(tmp_path, text, voice="espeak-ng.en-us", language=voice.languages[0])
    assert audio == expected
    words = [e for e in events if e[1] == 1]
    assert [(s, e) for _, _, s, e in words] == [(w.start, w.end) for w in timeline.words]
    # Each word event sits exactly where its audio starts.
    assert [at for at, _, _, _ in words] == [round(w.start_time * timeline.sample_rate) for w in timeline.words]
    assert [e[1] for e in events].count(2) == 2  # two sentences
    # Each sentence sits just before its first word (a sentence is known only once spoken:
    # its audio waits for it).
    for i, (at, kind, start, _) in enumerate(events):
        if kind == 2:
            assert events[i + 1][1] == 1 and events[i + 1][2] == start and events[i + 1][0] >= at


def test_parla_auto_switches_language(bus, tmp_path):
    text = "The revolutionary phone. Το επαναστατικό τηλέφωνο. هاتف ثوري."
    audio, events = parse(call(bus, text, voice="parla.auto"))
    expected, timeline = reference(tmp_path, text)
    assert audio == expected
    spoken = [text[s:e] for _, kind, s, e in events if kind == 1]
    assert spoken == [w.text for w in timeline.words]
    assert {w.language for w in timeline.words} == {"en", "el", "ar"}


def test_marks_sit_where_the_next_word_starts(bus):
    ssml = '<speak>Hello <mark name="één"/>big world.<mark name="end"/></speak>'
    audio, events = parse(call(bus, ssml, ssml=True))
    words = [e for e in events if e[1] == 1]
    marks = [e for e in events if e[1] == 4]
    assert [m[4] for m in marks] == ["één", "end"]
    assert marks[0][0] == words[1][0] and ssml[marks[0][2] :].startswith("big")
    assert marks[1][0] == len(audio) // 2 and marks[1][2] == len(ssml)
    assert events.index(marks[0]) == events.index(words[1]) - 1  # just before the word it precedes


def test_concurrent_requests_and_a_closed_pipe(bus):
    long_text = "This sentence is spoken many times over. " * 40
    results = {}

    def one(key, text):
        results[key] = parse(call(bus, text))

    threads = [threading.Thread(target=one, args=(k, t)) for k, t in (("a", long_text), ("b", "A short one."))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results["a"][0]) > len(results["b"][0]) > 0
    # Closing the pipe after the header stops the work; the provider goes on serving.
    r = call(bus, long_text, read=False)
    os.read(r, 4)
    os.close(r)
    audio, _ = parse(call(bus, "Still here."))
    assert len(audio) > 0


def test_errors(bus):
    with pytest.raises(GLib.Error, match="no voice"):
        call(bus, "Hello", voice="no-such-voice")
    with pytest.raises(GLib.Error, match="SSML"):
        call(bus, "<speak><s>unclosed", ssml=True)
    with pytest.raises(GLib.Error, match="language"):
        call(bus, "Hello", voice="parla.auto", language="not a tag!")


def test_idle_exit_and_activation_again(bus):
    call(bus, "Hello.")
    owner = lambda: bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameHasOwner",
                                   GLib.Variant("(s)", (sp.BUS_NAME,)), None, Gio.DBusCallFlags.NONE, 5000, None).unpack()[0]
    assert owner()
    deadline = time.monotonic() + 10
    while owner() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not owner(), "the provider did not exit when idle"
    audio, _ = parse(call(bus, "Back again."))
    assert len(audio) > 0 and owner()


def test_the_voice_list_follows_voices_added_and_removed(bus):
    """A Piper voice copied into a voice directory appears in Voices with a PropertiesChanged
    signal and speaks; removed, it goes the same way."""
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "parla", "piper-voices")
    model = os.environ.get("PARLA_TEST_PIPER_VOICE") or os.path.join(cache, "en_US-joe-medium.onnx")
    if not os.path.exists(model + ".json"):
        if os.environ.get("CI") == "true":
            pytest.fail(f"no Piper voice at {model} (scripts/setup downloads it)")
        pytest.skip("no Piper voice in the cache (scripts/setup downloads it)")
    signals = []
    context = GLib.MainContext.default()
    subscription = bus.signal_subscribe(
        None, "org.freedesktop.DBus.Properties", "PropertiesChanged", sp.OBJECT_PATH, None, Gio.DBusSignalFlags.NONE,
        lambda *args: signals.append(args[5].unpack()))

    def voices():
        return bus.call_sync(sp.BUS_NAME, sp.OBJECT_PATH, "org.freedesktop.DBus.Properties", "Get",
                             GLib.Variant("(ss)", (sp.INTERFACE, "Voices")), None, Gio.DBusCallFlags.NONE, 30000, None).unpack()[0]

    def ids():
        return [v[1] for v in voices()]

    def until(condition):
        deadline = time.monotonic() + 10
        while not condition() and time.monotonic() < deadline:
            while context.iteration(False):
                pass
            time.sleep(0.1)
        return condition()

    try:
        assert "piper.test-joe" not in ids()  # (this also starts the provider)
        target = bus.piper_directory / "test-joe.onnx"
        os.symlink(model, target)
        os.symlink(model + ".json", str(target) + ".json")
        assert until(lambda: any("piper.test-joe" in [v[1] for v in s[1].get("Voices", [])] for s in signals))
        assert "piper.test-joe" in ids()
        joe = next(v for v in voices() if v[1] == "piper.test-joe")
        assert joe[3] & 0xB == 0xB and not joe[3] & sp.SSML_PROSODY  # events, but no pitch
        assert not next(v for v in voices() if v[1] == "parla.auto")[3] & sp.SSML_PROSODY
        audio, events = parse(call(bus, "Hello from a new voice.", voice="piper.test-joe"))
        assert len(audio) > 22050 and [e for e in events if e[1] == 1]
        signals.clear()
        os.unlink(str(target) + ".json")
        os.unlink(target)
        assert until(lambda: signals and "piper.test-joe" not in [v[1] for v in signals[-1][1]["Voices"]])
        assert "piper.test-joe" not in ids()
    finally:
        bus.signal_unsubscribe(subscription)
