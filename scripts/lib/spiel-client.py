#!/usr/bin/python3
"""A minimal Spiel client: asks a speech provider on the session bus to synthesize TEXT, as
libspiel does (Synthesize with the write end of a pipe), reads the framed stream to its end
and prints what came as JSON: the audio's byte count, and the words, sentences and marks
with the text of their ranges. scripts/check-install runs it against an installed Parla.
    spiel-client.py [--provider NAME] [--voice ID] [--ssml] TEXT"""

import argparse
import json
import os
import struct
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider", default="org.parla.Speech.Provider")
    parser.add_argument("--voice", default="")
    parser.add_argument("--ssml", action="store_true")
    parser.add_argument("text")
    args = parser.parse_args()
    bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    path = "/" + args.provider.replace(".", "/")
    r, w = os.pipe()
    fds = Gio.UnixFDList.new()
    index = fds.append(w)
    os.close(w)
    try:
        bus.call_with_unix_fd_list_sync(
            args.provider, path, "org.freedesktop.Speech.Provider", "Synthesize",
            GLib.Variant("(hssddbs)", (index, args.text, args.voice, 1.0, 1.0, args.ssml, "")),
            None, Gio.DBusCallFlags.NONE, 60000, fds, None,
        )
    except GLib.Error as error:
        print(f"error: {error.message}", file=sys.stderr)
        return 1
    for copy in fds.steal_fds():  # the list's copy of the write end: the stream would never end
        os.close(copy)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    if data[:4] != b"0.01":
        print(f"error: the stream does not start with Spiel's header: {data[:4]!r}", file=sys.stderr)
        return 1
    at, audio, result = 4, 0, {"words": [], "sentences": [], "marks": []}
    names = {1: "words", 2: "sentences", 4: "marks"}
    while at < len(data):
        if data[at] == 1:
            (n,) = struct.unpack_from("<I", data, at + 1)
            audio += n
            at += 5 + n
        elif data[at] == 2:
            kind, start, end, length = struct.unpack_from("<BIII", data, at + 1)
            name = data[at + 14 : at + 14 + length].decode()
            result[names.get(kind, "other")] = result.get(names.get(kind, "other"), []) + [name or args.text[start:end]]
            at += 14 + length
        else:
            print(f"error: unknown chunk type {data[at]} at byte {at}", file=sys.stderr)
            return 1
    print(json.dumps({"audio_bytes": audio, **result}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
