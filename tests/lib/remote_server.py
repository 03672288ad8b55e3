"""A strict Bazel HTTP remote cache for the tests: the rules bazel-remote
enforces on its HTTP interface (bazel-remote itself needs a newer Go than
Debian ships), and misbehaviour on request.

    python remote_server.py DIR

serves DIR/data on 127.0.0.1 at a free port, which it writes to DIR/port
once it listens. Rules, as bazel-remote's server/http.go:

- the path is [PREFIX/](ac|cas)/SHA256 with 64 lower-case hex digits, else
  400; methods GET, HEAD and PUT, else 405
- a PUT needs Content-Length (400 without); a CAS upload must hash (SHA-256)
  to its name, an AC upload must parse as a REAPI ActionResult, else 400
- a miss is 404; an AC entry is served (GET and HEAD) only while every
  blob its output files name is in the CAS, else 404

Every request is logged to DIR/requests as "METHOD PATH STATUS". The first
line of DIR/mode, read at each request, makes the server misbehave:

    ok                       (or no file) behave
    refuse                   close the connection without a reply
    stall                    hold the request 30 s without a reply
    500                      answer 500 Internal Server Error
    truncate                 a GET of a blob sends its Content-Length but
                             half of its bytes, then closes
    wrong                    a GET of a blob answers bytes of the right
                             length that are not the blob's
    garbage                  a GET of an AC entry answers bytes that are no
                             ActionResult

A second word, ac or cas, limits the mode to that kind of path.
"""
import hashlib
import http.server
import os
import re
import socketserver
import sys
import time

PATH = re.compile(r"^/(?:.*/)?(ac|cas)/([a-f0-9]{64})$")


class Bad(Exception):
    pass


def varint(b, i):
    v = shift = 0
    while True:
        if i >= len(b):
            raise Bad("truncated varint")
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise Bad("varint too long")


def fields(b):
    """(number, wire type, value) of every field of message b; wire types
    0 (int), 1 and 5 (raw), 2 (bytes); groups are refused"""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise Bad("field number 0")
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1 or wt == 5:
            n = 8 if wt == 1 else 4
            if i + n > len(b):
                raise Bad("truncated fixed field")
            v, i = b[i:i + n], i + n
        elif wt == 2:
            n, i = varint(b, i)
            if i + n > len(b):
                raise Bad("truncated length-delimited field")
            v, i = b[i:i + n], i + n
        else:
            raise Bad("wire type %d" % wt)
        yield num, wt, v


# The REAPI messages an action entry holds (remote_execution.proto, with
# its field numbers): field -> (name, wire type, nested message or None).
DIGEST = {1: ("hash", 2, None), 2: ("size_bytes", 0, None)}
OUTPUT_FILE = {1: ("path", 2, None), 2: ("digest", 2, DIGEST), 4: ("is_executable", 0, None)}
OUTPUT_OTHER = {}  # directories and symlinks: only their wire type is checked
ACTION_RESULT = {2: ("output_files", 2, OUTPUT_FILE), 3: ("output_directories", 2, OUTPUT_OTHER),
                 4: ("exit_code", 0, None), 10: ("output_file_symlinks", 2, OUTPUT_OTHER),
                 11: ("output_directory_symlinks", 2, OUTPUT_OTHER), 12: ("output_symlinks", 2, OUTPUT_OTHER)}


def parse(b, schema, what):
    """message b as {name: [values]} by schema; unknown fields are skipped,
    a known one of another wire type is Bad"""
    out = {}
    for num, wt, v in fields(b):
        if num not in schema:
            continue
        name, want, sub = schema[num]
        if wt != want:
            raise Bad("%s.%s has wire type %d" % (what, name, wt))
        if sub is not None:
            v = parse(v, sub, name)
        elif want == 2 and name in ("hash", "path"):
            v = v.decode("utf-8")
        out.setdefault(name, []).append(v)
    return out


def parse_action_result(b):
    """the (path, hash, size) of each output file of a REAPI ActionResult;
    Bad when b is not one"""
    files = []
    for f in parse(b, ACTION_RESULT, "ActionResult").get("output_files", []):
        path, digest = f.get("path", [""])[-1], f.get("digest", [None])[-1]
        if not path or digest is None:
            raise Bad("an output file without path or digest")
        h, size = digest.get("hash", [""])[-1], digest.get("size_bytes", [0])[-1]
        if not re.fullmatch(r"[a-f0-9]{64}", h):
            raise Bad("digest hash %r is not a SHA-256" % h)
        if size >= 1 << 63:
            raise Bad("negative size_bytes")
        files.append((path, h, size))
    return files


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = None

    def log_message(self, fmt, *args):
        pass

    def record(self, status):
        with open(os.path.join(self.root, "requests"), "a") as f:
            f.write("%s %s %s\n" % (self.command, self.path, status))

    def mode(self, kind):
        try:
            with open(os.path.join(self.root, "mode")) as f:
                words = f.readline().split()
        except FileNotFoundError:
            return "ok"
        if not words:
            return "ok"
        if len(words) > 1 and kind != words[1]:
            return "ok"
        return words[0]

    def reply(self, status, body=b"", length=None):
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.record(status)

    def store(self, kind, h):
        return os.path.join(self.root, "data", kind, h[:2], h)

    def ac_complete(self, data):
        try:
            files = parse_action_result(data)
        except Bad:
            return False
        return all(size == 0 or os.path.exists(self.store("cas", h)) for _, h, size in files)

    def handle_one(self):
        m = PATH.match(self.path)
        kind = m.group(1) if m else None
        mode = self.mode(kind)
        if mode == "refuse":
            self.record("refused")
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if mode == "stall":
            self.record("stalled")
            time.sleep(30)
            self.close_connection = True
            return
        if mode == "500":
            return self.reply(500, b"internal error\n")
        if self.command not in ("GET", "HEAD", "PUT"):
            return self.reply(405, b"method not supported\n")
        if not m:
            return self.reply(400, b"the path must be (ac/|cas/)SHA256\n")
        h = m.group(2)
        path = self.store(kind, h)
        if self.command == "PUT":
            n = self.headers.get("Content-Length")
            if n is None:
                self.close_connection = True
                return self.reply(400, b"PUT without Content-Length\n")
            data = self.rfile.read(int(n))
            if len(data) != int(n):
                self.close_connection = True
                return self.reply(400, b"sizes don't match\n")
            if kind == "cas" and hashlib.sha256(data).hexdigest() != h:
                return self.reply(400, b"the blob's SHA-256 is not its name\n")
            if kind == "ac":
                try:
                    parse_action_result(data)
                except (Bad, UnicodeDecodeError) as e:
                    return self.reply(400, ("not an ActionResult: %s\n" % e).encode())
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = "%s.%d.tmp" % (path, os.getpid())
            with open(tmp, "wb") as f:
                f.write(data)
            os.rename(tmp, path)
            return self.reply(200)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return self.reply(404, b"Not found\n")
        if kind == "ac" and not self.ac_complete(data):
            return self.reply(404, b"Not found\n")
        if self.command == "GET" and mode == "truncate" and len(data) > 1:
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.record("200-truncated")
            return
        if self.command == "GET" and mode == "wrong" and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        if self.command == "GET" and mode == "garbage" and kind == "ac":
            data = b"\xff\xff\xff garbage"
        return self.reply(200, data)

    def do_GET(self):
        self.handle_one()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    root = sys.argv[1]
    os.makedirs(os.path.join(root, "data"), exist_ok=True)
    Handler.root = root
    srv = Server(("127.0.0.1", 0), Handler)
    tmp = os.path.join(root, "port.tmp")
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, os.path.join(root, "port"))
    srv.serve_forever()


if __name__ == "__main__":
    main()
