"""A mirror of Piper's voice catalog for the tests of `parla voices install`, with faults.

Serves DIRECTORY over HTTP on 127.0.0.1 (a free port, printed on the first line of standard
output), with byte ranges (resume). The first part of a path picks a behaviour, the rest is a
file under DIRECTORY; voices.json comes from DIRECTORY/MODE-voices.json when there is one:

  ok          serves the files as they are
  drop        the first request for a file sends half of it, then closes the connection
  dropalways  every request sends half of what it asked for, then closes the connection
  damaged     one byte of every .onnx is changed
  missing     .onnx files answer 404
  slow        sends at about 2 MB/s

Each request is logged to standard output as "GET PATH RANGE".
"""

import http.server
import os
import signal
import socketserver
import sys
import time

# A test process may start this with signals blocked: SIGTERM must end it.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
signal.signal(signal.SIGTERM, signal.SIG_DFL)

root = sys.argv[1]
dropped = set()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        parts = self.path.split("?")[0].lstrip("/").split("/", 1)
        mode, rest = (parts[0], parts[1]) if len(parts) == 2 else ("ok", parts[0])
        print(f"GET {self.path} {self.headers.get('Range', '-')}", flush=True)
        path = os.path.join(root, rest)
        if rest == "voices.json" and os.path.exists(os.path.join(root, f"{mode}-voices.json")):
            path = os.path.join(root, f"{mode}-voices.json")
        if not os.path.isfile(path) or (mode == "missing" and rest.endswith(".onnx")):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            data = f.read()
        if mode == "damaged" and rest.endswith(".onnx"):
            middle = len(data) // 2
            data = data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]
        start = 0
        ranged = self.headers.get("Range")
        if ranged and ranged.startswith("bytes="):
            start = int(ranged[6:].split("-")[0] or 0)
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        drop = rest != "voices.json" and (mode == "dropalways" or (mode == "drop" and rest not in dropped))
        if drop:
            dropped.add(rest)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "slow" and rest != "voices.json":
            for i in range(0, len(body), 64 * 1024):
                self.wfile.write(body[i : i + 64 * 1024])
                time.sleep(0.03)
            return
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
