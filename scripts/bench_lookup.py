"""speak-selection's lookup times; run by scripts/bench-lookup (which starts the X server and
the session bus, and exports DISPLAY and DBUS_SESSION_BUS_ADDRESS)."""
import os
import re
import socket
import statistics
import subprocess
import sys
import time

binary, directory, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "selection_app.py")
TEXT = "Hello there, this is the selected text. Καλημέρα σας."


def measure(name, args, env, expect_source=None):
    walls, lookups, sources = [], [], set()
    for _ in range(runs):
        start = time.perf_counter()
        r = subprocess.run([binary, "--print"] + args, env=env, capture_output=True, text=True)
        walls.append((time.perf_counter() - start) * 1000)
        m = re.search(r"Source: (.*) \(([\d.]+) ms\)", r.stderr) or re.search(r"looked in ([\d.]+) ms", r.stderr)
        if m and m.lastindex == 1:
            sources.add(re.sub(r" \(looked in [\d.]+ ms\)\.", "", r.stderr.strip().splitlines()[-1]))
        if m and m.lastindex == 2:
            sources.add(m.group(1))
            lookups.append(float(m.group(2)))
        elif m:
            lookups.append(float(m.group(1)))
        if not m:
            sources.add(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}")
    def stats(xs):
        if not xs:
            return "   –   "
        xs = sorted(xs)
        return f"{statistics.median(xs):6.1f} / {xs[min(len(xs) - 1, int(len(xs) * 0.95))]:6.1f}"
    print(f"{name:<44} process {stats(walls)} ms   lookup {stats(lookups)} ms   ({', '.join(sorted(sources))})")
    if expect_source and sources != {expect_source}:
        print(f"  expected the text from {expect_source}", file=sys.stderr)


base = dict(os.environ)
base.pop("WAYLAND_DISPLAY", None)
base.pop("AT_SPI_BUS_ADDRESS", None)
tools = os.path.join(directory, "tools")
os.makedirs(tools, exist_ok=True)
with open(os.path.join(tools, "wl-paste"), "w") as f:
    f.write("#!/bin/sh\nexec sleep 30\n")
os.chmod(os.path.join(tools, "wl-paste"), 0o755)
hung_path = os.path.join(directory, "hung-bus")
hung = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
hung.bind(hung_path)
hung.listen(64)

print(f"speak-selection --print, {runs} runs each, median / p95")
app = subprocess.Popen(["/usr/bin/python3", APP, TEXT, "0", str(len(TEXT))], env=base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    deadline = time.time() + 30
    while time.time() < deadline:
        r = subprocess.run([binary, "--print", "--sources", "accessibility", "--timeout", "1000"], env=base, capture_output=True, text=True)
        if r.stdout.strip() == TEXT:
            break
        time.sleep(0.2)
    else:
        sys.exit("the GTK application's selection never appeared on the accessibility bus")
    measure("1. AT-SPI (GTK 3 text view)", [], base, "accessibility (AT-SPI)")
    # PRIMARY holds the same text (GTK sets it too); without the session bus only xclip answers.
    no_bus = dict(base)
    no_bus.pop("DBUS_SESSION_BUS_ADDRESS")
    no_bus["XDG_RUNTIME_DIR"] = os.path.join(directory, "tools")
    measure("2. PRIMARY through xclip, no AT-SPI", [], no_bus, "primary (xclip)")
    gnome = dict(no_bus, WAYLAND_DISPLAY="wayland-bench", PATH=tools + ":" + base["PATH"])
    measure("3. wl-paste hangs, xclip has PRIMARY", [], gnome, "primary (xclip)")
    nothing = dict(gnome, AT_SPI_BUS_ADDRESS="unix:path=" + hung_path)
    nothing.pop("DISPLAY")
    measure("4. nothing answers (hung bus, hung wl-paste)", [], nothing)
finally:
    app.kill()
    app.wait()
