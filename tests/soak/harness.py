"""Shared helpers of tests/soak/soak.py and tests/hostile/hostile_http.py (Python 3 stdlib only).

- where the binary and the fixture are ($EMBER_BINARY, default build/ember; $EMBER_FIXTURES,
  default ../shared/fixtures, then tests/fixtures), and the 77 "SKIPPED: ..." exit when either is
  absent;
- Daemon: `ember serve` on a free 127.0.0.1 port, its output in a log file, readiness, RSS from
  /proc/PID/status, SIGTERM and the exit status;
- a raw-socket HTTP/1.1 client (every socket operation has a timeout) that can stop anywhere:
  after part of the request, after the response header, after some body chunks;
- the Prometheus text of /metrics as a dict.

Traffic only ever goes to 127.0.0.1.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HOST = "127.0.0.1"
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SKIP_EXIT = 77


def ember_binary():
    return os.environ.get("EMBER_BINARY") or os.path.join(REPO, "build", "ember")


def fixtures_dir():
    """The fixtures folder, or None. The order of tests/support/fixtures.h and
    scripts/fixtures-dir.sh: $EMBER_FIXTURES when set (even when it is no folder: an explicit
    choice), then ../shared/fixtures beside the repository, then tests/fixtures."""
    env = os.environ.get("EMBER_FIXTURES")
    candidates = [env] if env else [os.path.join(REPO, "..", "shared", "fixtures"),
                                    os.path.join(REPO, "tests", "fixtures")]
    return next((os.path.abspath(d) for d in candidates if os.path.isdir(d)), None)


MODEL_FIXTURE = os.path.join("models", "stories260K.gguf")


def model_path():
    return os.path.join(fixtures_dir() or "", MODEL_FIXTURE)


def skip_unless_ready():
    """Exit 77 with a SKIPPED line when the binary or the model fixture is missing."""
    binary, model = ember_binary(), model_path()
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"SKIPPED: ember binary not found at {binary} (build it, or set EMBER_BINARY)", flush=True)
        sys.exit(SKIP_EXIT)
    if fixtures_dir() is None or not os.path.isfile(model):
        print(f"SKIPPED: fixture {MODEL_FIXTURE} not found in {fixtures_dir() or 'any fixtures folder'} "
              "(set EMBER_FIXTURES or run scripts/fetch-fixtures.sh)", flush=True)
        sys.exit(SKIP_EXIT)


def free_port():
    """A port nobody listens on right now (bind 0, read, release); Daemon retries on a lost race."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def daemon_environment(extra=None):
    """Our environment without EMBER_* settings (a developer's EMBER_API_KEY must not leak in),
    except the kernel choice; plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_") or k == "EMBER_KERNELS"}
    env.update(extra or {})
    return env


class Daemon:
    """`ember serve -m stories260K.gguf -t 1 --port P ARGS...`; use as a context manager."""

    def __init__(self, args=(), env=None, log_path=None, ready_timeout=30.0, threads=1, model=None):
        self.args = list(args)
        self.env = env or {}
        self.ready_timeout = ready_timeout
        self.threads = threads
        self.model = model or model_path()
        self.own_log = log_path is None
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="ember-daemon-", suffix=".log")
            os.close(fd)
        self.log_path = log_path
        self.proc = None
        self.port = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self):
        last = None
        for _attempt in range(3):
            self.port = free_port()
            argv = [ember_binary(), "serve", "-m", self.model, "-t", str(self.threads),
                    "--port", str(self.port)] + self.args
            self.argv = argv
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=daemon_environment(self.env))
            log.close()
            deadline = time.monotonic() + self.ready_timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    if request(self.port, "GET", "/health", timeout=1.0).status == 200:
                        return self
                except OSError:
                    pass
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.kill()
                raise RuntimeError(f"ember serve did not answer /health within {self.ready_timeout} s\n"
                                   + self.log_tail())
            last = RuntimeError(f"ember serve exited with {self.proc.returncode} before it was ready\n"
                                + self.log_tail())
            if "bind" not in self.log_tail().lower() and "in use" not in self.log_tail().lower():
                break
        raise last

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.kill()
        if self.own_log and exc[0] is None:
            try:
                os.unlink(self.log_path)
            except OSError:
                pass

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Sends `sig`, waits for the exit (SIGKILL after `timeout`); returns (returncode, seconds)."""
        if self.proc is None:
            return None, 0.0
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode, time.monotonic() - t0

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
            return data[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def rss_kib(self):
        return rss_kib(self.pid)

    # -- requests ----------------------------------------------------------------------------
    def request(self, method, path, body=None, headers=None, timeout=10.0):
        return request(self.port, method, path, body, headers, timeout)

    def health_ok(self, timeout=5.0):
        try:
            return self.request("GET", "/health", timeout=timeout).status == 200
        except OSError:
            return False

    def metrics(self, timeout=10.0):
        res = self.request("GET", "/metrics", timeout=timeout)
        if res.status != 200:
            raise RuntimeError(f"/metrics answered {res.status}")
        return parse_prometheus(res.body.decode("utf-8", "replace"))


def rss_kib(pid):
    """VmRSS of `pid` in KiB, or None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def parse_prometheus(text):
    """{'name' or 'name{labels}': float} for every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out


def http_requests_total(metrics, endpoint=None, status=None):
    """Sum of ember_http_requests_total over the samples matching endpoint/status (None: any)."""
    total = 0.0
    for key, v in metrics.items():
        if not key.startswith("ember_http_requests_total{"):
            continue
        if endpoint is not None and f'endpoint="{endpoint}"' not in key:
            continue
        if status is not None and f'status="{status}"' not in key:
            continue
        total += v
    return total


# -- raw HTTP -----------------------------------------------------------------------------------

class Response:
    def __init__(self):
        self.version = ""
        self.status = 0
        self.reason = ""
        self.headers = []  # [(lower-case name, value)]
        self.body = b""
        self.complete = False  # the body ended as framed (last chunk / Content-Length / close)
        self.closed = False    # the server closed the connection after it

    def header(self, name):
        name = name.lower()
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k == name]

    def json(self):
        return json.loads(self.body)


class Conn:
    """One TCP connection with a read buffer; every operation times out."""

    def __init__(self, port, timeout=10.0, host=HOST):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.buf = bytearray()
        self.eof = False

    def settimeout(self, t):
        self.sock.settimeout(t)

    def send(self, data):
        self.sock.sendall(data)

    def close(self, reset=False):
        try:
            if reset:  # RST instead of FIN (and no TIME_WAIT on our side)
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.sock.close()
        except OSError:
            pass

    def _fill(self):
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_until(self, delim, limit=1 << 20):
        while True:
            i = self.buf.find(delim)
            if i >= 0:
                out = bytes(self.buf[:i + len(delim)])
                del self.buf[:i + len(delim)]
                return out
            if len(self.buf) > limit:
                raise ValueError("line too long")
            if self.eof or not self._fill():
                raise EOFError("connection closed")

    def read_exact(self, n):
        while len(self.buf) < n:
            if self.eof or not self._fill():
                raise EOFError("connection closed")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_to_close(self, limit=64 << 20):
        while not self.eof and len(self.buf) < limit:
            if not self._fill():
                break
        out = bytes(self.buf)
        self.buf.clear()
        return out

    def read_head(self):
        """Status line and headers of the next response (skips 1xx)."""
        while True:
            head = self.read_until(b"\r\n\r\n", limit=256 << 10).decode("latin-1")
            lines = head.split("\r\n")
            parts = lines[0].split(" ", 2)
            res = Response()
            res.version = parts[0]
            res.status = int(parts[1])
            res.reason = parts[2] if len(parts) > 2 else ""
            for line in lines[1:]:
                if not line:
                    continue
                k, _, v = line.partition(":")
                res.headers.append((k.strip().lower(), v.strip()))
            if 100 <= res.status < 200:
                continue
            return res

    def body_pieces(self, res, method="GET"):
        """Yields the body as it comes: chunk by chunk when chunked. Sets res.complete."""
        if method == "HEAD" or res.status in (204, 304):
            res.complete = True
            return
        te = (res.header("transfer-encoding") or "").lower()
        if "chunked" in te:
            while True:
                line = self.read_until(b"\r\n", limit=4096)
                size = int(line.split(b";")[0].strip(), 16)
                if size == 0:
                    while self.read_until(b"\r\n", limit=1 << 16) != b"\r\n":  # trailers
                        pass
                    res.complete = True
                    return
                data = self.read_exact(size)
                if self.read_exact(2) != b"\r\n":
                    raise ValueError("bad chunk framing")
                yield data
        elif res.header("content-length") is not None:
            n = int(res.header("content-length"))
            if n:
                yield self.read_exact(n)
            res.complete = True
        else:  # to the close
            while True:
                if self.buf:
                    data = bytes(self.buf)
                    self.buf.clear()
                    yield data
                if self.eof or not self._fill():
                    break
            res.complete = True
            res.closed = True

    def read_response(self, method="GET"):
        res = self.read_head()
        res.body = b"".join(self.body_pieces(res, method))
        conn_hdr = (res.header("connection") or "").lower()
        if "close" in conn_hdr:
            res.closed = True
        return res


def build_request(method, path, body=None, headers=None, host=True, version="HTTP/1.1"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    hdrs = []
    if host:
        hdrs.append(("Host", "localhost"))
    names = {k.lower() for k, _ in (headers or {}).items()} if isinstance(headers, dict) else \
        {k.lower() for k, _ in (headers or [])}
    items = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    hdrs += items
    if body is not None:
        if "content-type" not in names:
            hdrs.append(("Content-Type", "application/json"))
        if "content-length" not in names and "transfer-encoding" not in names:
            hdrs.append(("Content-Length", str(len(body))))
    target = path.encode("latin-1") if isinstance(path, str) else path
    out = method.encode() + b" " + target + b" " + version.encode() + b"\r\n"
    for k, v in hdrs:
        out += k.encode("latin-1") + b": " + (v.encode("latin-1") if isinstance(v, str) else v) + b"\r\n"
    out += b"\r\n"
    if body is not None:
        out += body
    return out


def request(port, method, path, body=None, headers=None, timeout=10.0):
    """One request on a fresh connection (Connection: close); the whole Response."""
    hdrs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    if not any(k.lower() == "connection" for k, _ in hdrs):
        hdrs.append(("Connection", "close"))
    c = Conn(port, timeout)
    try:
        c.send(build_request(method, path, body, hdrs))
        return c.read_response(method)
    finally:
        c.close()


def sse_events(text):
    """The events of an SSE body: [{'data': str or None, 'comment': bool, 'raw': str}]."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        data = []
        comment = True
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            comment = False
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" ") if line.startswith("data: ") or line.startswith("data:") else "")
        events.append({"data": "\n".join(data) if data else None, "comment": comment, "raw": block})
    return events
