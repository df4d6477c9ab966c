#!/usr/bin/python3
"""A speech-dispatcher client for Parla's tests and benchmarks, on python3-speechd (the
library Orca uses). Run it with /usr/bin/python3 (Debian's python3-speechd).

Sends one request, then prints each event as a JSON line with its CLOCK_MONOTONIC time
(the clock Parla's events and the test recorder use) and exits after the message ends.

  speechd-client.py ADDRESS [--module parla] [--language en-US] [--voice NAME]
                    (--ssml TEXT | --text TEXT | --char C | --key NAME)
                    [--cancel-after S] [--pause-after S --resume-after S] [--timeout S]
"""
import argparse
import json
import sys
import threading
import time

import speechd

parser = argparse.ArgumentParser()
parser.add_argument("address")
parser.add_argument("--module", default="parla")
parser.add_argument("--language", default="en-US")
parser.add_argument("--voice")
what = parser.add_mutually_exclusive_group(required=True)
what.add_argument("--ssml")
what.add_argument("--text")
what.add_argument("--char")
what.add_argument("--key")
parser.add_argument("--cancel-after", type=float)
parser.add_argument("--pause-after", type=float)
parser.add_argument("--resume-after", type=float, default=0.5)
parser.add_argument("--timeout", type=float, default=30)
args = parser.parse_args()

lock = threading.Lock()
events = []
ended = threading.Event()
paused = threading.Event()


def emit(record):
    record["t_ns"] = time.monotonic_ns()
    with lock:
        print(json.dumps(record), flush=True)


def callback(event_type, index_mark=None):
    # Runs on the client's reader thread: it must not call the client.
    if event_type == speechd.CallbackType.INDEX_MARK:
        emit({"event": "index_mark", "name": index_mark})
    else:
        emit({"event": event_type})
    if event_type in (speechd.CallbackType.END, speechd.CallbackType.CANCEL):
        ended.set()
    if event_type == speechd.CallbackType.PAUSE:
        paused.set()


client = speechd.SSIPClient("parla-test", address=args.address, autospawn=False)
client.set_output_module(args.module)
client.set_language(args.language)
if args.voice:
    client.set_synthesis_voice(args.voice)
if args.ssml is not None:
    client.set_data_mode(speechd.DataMode.SSML)
    emit({"event": "sent"})
    client.speak(args.ssml, callback=callback)
elif args.text is not None:
    emit({"event": "sent"})
    client.speak(args.text, callback=callback)
elif args.char is not None:
    client.set_data_mode(speechd.DataMode.TEXT)
    emit({"event": "sent"})
    client.char(args.char)
else:
    emit({"event": "sent"})
    client.key(args.key)
if args.char is not None or args.key is not None:
    # CHAR and KEY take no callback: the caller listens at the sink.
    time.sleep(1.5)
    client.close()
    sys.exit(0)

if args.cancel_after is not None:
    time.sleep(args.cancel_after)
    emit({"event": "cancel_sent"})
    client.cancel()
if args.pause_after is not None:
    time.sleep(args.pause_after)
    emit({"event": "pause_sent"})
    client.pause()
    if not paused.wait(args.timeout):
        emit({"event": "timeout", "waiting_for": "pause"})
        sys.exit(1)
    time.sleep(args.resume_after)
    emit({"event": "resume_sent"})
    client.resume()
ok = ended.wait(args.timeout)
if not ok:
    emit({"event": "timeout", "waiting_for": "end"})
client.close()
sys.exit(0 if ok else 1)
