"""scripts/bench-spiel: parla.speech_provider on a private session bus, voice warm.
  1. Synthesize of one word → its first audio byte on the pipe;
  2. the client closing the pipe → the provider's work for that request has ended (the
     provider logs when, PARLA_PROVIDER_LOG, on the same monotonic clock)."""

import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

from parla import speech_provider as sp  # noqa: E402

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
d = Path(tempfile.mkdtemp())
(d / "services").mkdir()
(d / "services" / f"{sp.BUS_NAME}.service").write_text(sp.service_file())
address = f"unix:path={d}/socket"
(d / "session.conf").write_text(
    f"""<busconfig><type>session</type><listen>{address}</listen><servicedir>{d}/services</servicedir>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>"""
)
log = d / "provider.log"
env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address, PARLA_PROVIDER_LOG=str(log))
daemon = subprocess.Popen(["dbus-daemon", "--config-file", str(d / "session.conf"), "--nofork"], env=env)
for _ in range(100):
    if (d / "socket").exists():
        break
    time.sleep(0.05)
bus = Gio.DBusConnection.new_for_address_sync(
    address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None
)


def start(text):
    r, w = os.pipe()
    fds = Gio.UnixFDList.new()
    index = fds.append(w)
    os.close(w)
    bus.call_with_unix_fd_list_sync(
        sp.BUS_NAME, sp.OBJECT_PATH, sp.INTERFACE, "Synthesize",
        GLib.Variant("(hssddbs)", (index, text, "espeak-ng.en-us", 1.0, 1.0, False, "")), None, Gio.DBusCallFlags.NONE, 30000, fds, None,
    )
    for copy in fds.steal_fds():
        os.close(copy)
    return r


def read_exactly(fd, n):
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def first_audio_byte(fd):
    read_exactly(fd, 4)  # header
    while True:
        kind = read_exactly(fd, 1)[0]
        if kind == 1:
            read_exactly(fd, 4)
            read_exactly(fd, 1)
            return
        read_exactly(fd, 13)


try:
    os.close(start("Warm up."))
    time.sleep(0.5)
    firsts = []
    for _ in range(RUNS):
        t0 = time.monotonic_ns()
        fd = start("Hello")
        first_audio_byte(fd)
        firsts.append((time.monotonic_ns() - t0) / 1e6)
        os.read(fd, 1 << 20)
        os.close(fd)
        time.sleep(0.1)
    stops = []
    long_text = "This sentence is spoken many times over, for as long as it takes. " * 200
    for _ in range(RUNS):
        log.write_text("")
        fd = start(long_text)
        first_audio_byte(fd)
        time.sleep(0.05)
        t0 = time.monotonic_ns()
        os.close(fd)
        deadline = time.monotonic() + 10
        while "ended" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.0005)
        ended = int(log.read_text().split()[0])
        stops.append((ended - t0) / 1e6)
    q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]
    print(f"Spiel provider, {RUNS} runs, median / p95:")
    print(f"  Synthesize('Hello') → first audio byte on the pipe: {q(firsts, 0.5):.1f} / {q(firsts, 0.95):.1f} ms (target ≤ 10)")
    print(f"  closing the pipe → the request's work ended: {q(stops, 0.5):.1f} / {q(stops, 0.95):.1f} ms (target ≤ 10)")
finally:
    daemon.terminate()
