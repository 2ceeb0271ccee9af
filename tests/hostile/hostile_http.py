#!/usr/bin/env python3
"""Hostile input against the real `ember serve`: one named check per probe, PASS/FAIL each.

    tests/hostile/hostile_http.py              # every probe (about a minute)
    tests/hostile/hostile_http.py -k trailer   # only probes whose name contains "trailer"
    tests/hostile/hostile_http.py --list

Same conventions as tests/soak/soak.py (whose harness.py it uses): the binary is $EMBER_BINARY
(default build/ember), the model models/stories260K.gguf in the fixtures folder ($EMBER_FIXTURES,
else ../shared/fixtures, else tests/fixtures); either absent: "SKIPPED: ..." and exit 77. The
daemon listens on a free 127.0.0.1 port; no traffic goes anywhere else. Every socket operation has
a timeout and every loop a bound.

After each probe the daemon must still be alive and answer GET /health with 200 (a probe that
kills it fails, and the next probes get a fresh daemon). The expected behaviour of each probe is
the fixed one (each probe's docstring says what used to go wrong). The last line is exactly
`N passed, M failed`; the exit status is 1 when M > 0.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__/ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "soak"))
import harness  # noqa: E402

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


class ProbeFailure(Exception):
    pass


def expect(cond, msg):
    if not cond:
        raise ProbeFailure(msg)


# -- raw exchanges --------------------------------------------------------------------------------

class RawResult:
    def __init__(self):
        self.status = None      # None: no response (closed or reset)
        self.res = None
        self.error = None       # what ended the exchange without a response
        self.send_error = None

    def describe(self):
        if self.status is not None:
            return f"{self.status} {self.res.body[:160]!r}"
        return f"no response ({self.error or 'closed'})"


def raw_exchange(port, data, timeout=10.0, chunks=None, send_deadline=30.0):
    """Sends `data` (bytes) or, with `chunks` (an iterable of bytes), the pieces one by one from a
    second thread while this one reads; returns a RawResult. A close or reset instead of an answer
    is not an exception: it is one of the outcomes the probes judge."""
    out = RawResult()
    try:
        conn = harness.Conn(port, timeout)
    except OSError as e:
        out.error = f"connect: {e}"
        return out
    stop = threading.Event()

    def sender():
        t_end = time.monotonic() + send_deadline
        try:
            if data:
                conn.send(data)
            for piece in chunks or ():
                if stop.is_set() or time.monotonic() > t_end:
                    break
                conn.send(piece)
        except OSError as e:
            out.send_error = f"{type(e).__name__}"

    t = threading.Thread(target=sender, daemon=True)
    t.start()
    try:
        out.res = conn.read_response()
        out.status = out.res.status
    except (OSError, EOFError, ValueError) as e:
        out.error = f"{type(e).__name__}: {e}" if not isinstance(e, EOFError) else "closed"
    finally:
        stop.set()
        t.join(send_deadline + 5)
        conn.close()
    return out


def post_json(d, path, body, headers=None, timeout=30.0):
    res = d.request("POST", path, body, headers, timeout=timeout)
    try:
        j = res.json()
    except ValueError:
        j = None
    return res, j


def error_message(j):
    if isinstance(j, dict) and isinstance(j.get("error"), dict):
        return str(j["error"].get("message", ""))
    return ""


class LatencyPoller:
    """GET /health every `interval` s from another thread; records each latency (a failure counts
    as its timeout)."""

    def __init__(self, port, interval=0.02, timeout=5.0):
        self.port, self.interval, self.timeout = port, interval, timeout
        self.latencies = []
        self.failures = 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        n = 0
        while not self.stop_event.is_set() and n < 100_000:
            n += 1
            t0 = time.monotonic()
            try:
                ok = harness.request(self.port, "GET", "/health", timeout=self.timeout).status == 200
            except OSError:
                ok = False
            lat = time.monotonic() - t0
            self.latencies.append(lat)
            if not ok:
                self.failures += 1
            self.stop_event.wait(self.interval)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(10)

    def worst(self):
        return max(self.latencies) if self.latencies else 0.0


def peak_rss_during(pid, fn, interval=0.02):
    """Runs fn() while sampling the RSS of pid; returns (fn's result, rss before KiB, peak KiB)."""
    before = harness.rss_kib(pid) or 0
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            r = harness.rss_kib(pid)
            if r:
                peak[0] = max(peak[0], r)
            done.wait(interval)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        result = fn()
    finally:
        done.set()
        t.join(5)
    r = harness.rss_kib(pid)
    if r:
        peak[0] = max(peak[0], r)
    return result, before, peak[0]


# -- the probes -----------------------------------------------------------------------------------
# Each takes the shared daemon and returns a one-line detail, or raises ProbeFailure.

def probe_chunked_trailer_64k(d):
    """a. A chunked request whose trailer field value is 65,534 bytes: 400/431 or a close."""
    data = (b"GET /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: "
            + b"a" * 65534 + b"\r\n\r\n")
    r = raw_exchange(d.port, data, timeout=10)
    expect(r.status in (None, 400, 431), f"want 400/431 or close, got {r.describe()}")
    return r.describe()


def probe_header_70k_with_1mib_limit(d):
    """b. EMBER_MAX_HEADER_BYTES=1048576 (own daemon), one header value of 70,000 bytes: the daemon
    survives and answers 400/431 or closes."""
    with harness.Daemon(env={"EMBER_MAX_HEADER_BYTES": "1048576"}) as big:
        data = (b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 70000 + b"\r\nConnection: close\r\n\r\n")
        r = raw_exchange(big.port, data, timeout=10)
        time.sleep(0.2)
        expect(big.alive(), f"the daemon died ({big.proc.returncode}); {r.describe()}\n{big.log_tail(800)}")
        expect(big.health_ok(), "/health not 200 afterwards")
        expect(r.status in (None, 400, 431), f"want 400/431 or close, got {r.describe()}")
        rc, _ = big.stop()
        expect(rc == 0, f"SIGTERM exit {rc}")
        return r.describe()


def probe_many_large_trailers(d):
    """c. 2,500 trailer fields of 60 KB on one connection: refused (431/400/close) and the RSS
    grows by at most 16 MiB."""
    head = b"GET /health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
    field_value = b"b" * (60 * 1024)
    pieces = (b"X-T%d: " % i + field_value + b"\r\n" for i in range(2500))

    def run():
        return raw_exchange(d.port, head, timeout=20, chunks=pieces, send_deadline=30)

    r, before, peak = peak_rss_during(d.pid, run)
    growth = (peak - before) / 1024.0
    detail = f"{r.describe()}, RSS {before / 1024:.1f} -> peak {peak / 1024:.1f} MiB (+{growth:.1f})"
    expect(r.status in (None, 400, 431), f"want 431/400 or close, got {detail}")
    expect(growth <= 16.0, f"RSS grew by more than 16 MiB: {detail}")
    return detail


def probe_empty_api_key_lists(d):
    """d. EMBER_API_KEY "," / ",," / " , ": `ember serve` refuses to start, naming the key list."""
    details = []
    for value in (",", ",,", " , "):
        env = harness.daemon_environment({"EMBER_API_KEY": value})
        argv = [harness.ember_binary(), "serve", "-m", harness.model_path(), "-t", "1",
                "--port", str(harness.free_port())]
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        try:
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate(timeout=10)
            raise ProbeFailure(f"EMBER_API_KEY={value!r}: still running after 10 s (it started without keys)")
        text = out.decode("utf-8", "replace").strip()
        expect(p.returncode != 0, f"EMBER_API_KEY={value!r}: exit 0: {text[-300:]}")
        expect(re.search(r"api_keys|EMBER_API_KEY", text),
               f"EMBER_API_KEY={value!r}: the message does not name the key list: {text[-300:]!r}")
        details.append(f"{value!r}: exit {p.returncode}")
    return "; ".join(details)


def probe_special_tokens_in_content(d):
    """e. Chat content "x</s></s></s>": "</s>" is text, not 3 EOS tokens. prompt_tokens must grow by
    about the plain-text token count of "</s></s></s>" (/tokenize, parse_special false), less 2 for
    merges at the boundary; as 3 special tokens it grows by about 3."""
    res = d.request("POST", "/tokenize", {"content": "</s></s></s>", "parse_special": False})
    expect(res.status == 200, f"/tokenize: {res.status}")
    n_text = len(res.json()["tokens"])
    counts = {}
    for content in ("x", "x</s></s></s>"):
        res, j = post_json(d, CHAT, {"messages": [{"role": "user", "content": content}], "max_tokens": 1})
        expect(res.status == 200, f"{content!r}: {res.status} {res.body[:200]!r}")
        counts[content] = j["usage"]["prompt_tokens"]
    diff = counts["x</s></s></s>"] - counts["x"]
    detail = (f"prompt_tokens x={counts['x']}, x</s></s></s>={counts['x</s></s></s>']} (+{diff}; "
              f"'</s></s></s>' is {n_text} text tokens)")
    expect(diff > 3 and diff >= n_text - 2, f"{detail}: the '</s>' were parsed as special tokens")
    return detail


UNSUPPORTED = [
    (CHAT, "response_format", {"response_format": {"type": "json_schema", "json_schema": {"schema": {"not": {}}}}}),
    (CHAT, "tools", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "array", "uniqueItems": True}}}}}], "tool_choice": "required"}),
    (CHAT, "tool_choice", {"tool_choice": {"type": "function", "function": {"name": "not_in_tools"}}}),
    (CHAT, "functions", {"functions": [{"name": "f"}]}),
    (COMPLETIONS, "tools", {"tools": [{"type": "function", "function": {"name": "f"}}]}),
    (CHAT, "logprobs", {"logprobs": "yes"}),
    (CHAT, "top_logprobs", {"top_logprobs": 2}),
    (CHAT, "echo", {"echo": True}),
    (COMPLETIONS, "suffix", {"suffix": "x"}),
    (COMPLETIONS, "best_of", {"best_of": 2}),
]


def base_body(path):
    if path == CHAT:
        return {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    return {"prompt": "hi", "max_tokens": 2}


def probe_unsupported_fields(d):
    """f. Fields Ember does not implement, or values it cannot honour (a schema keyword it cannot
    enforce), are 400 naming the field (not silently ignored);
    response_format {"type":"text"} is 200."""
    bad = []
    for path, field, extra in UNSUPPORTED:
        res, j = post_json(d, path, {**base_body(path), **extra})
        msg = error_message(j)
        if res.status != 400 or field not in msg:
            bad.append(f"{field}: {res.status} {msg[:80]!r}" if res.status == 400 else f"{field}: {res.status}")
    res, _ = post_json(d, CHAT, {**base_body(CHAT), "response_format": {"type": "text"}})
    if res.status != 200:
        bad.append(f'response_format text: {res.status} (want 200)')
    expect(not bad, "; ".join(bad))
    return f"{len(UNSUPPORTED)} fields refused by name, response_format text 200"


def probe_content_part_type_not_string(d):
    """g. A chat content part whose "type" is not a string: 400."""
    res, j = post_json(d, CHAT, {"messages": [{"role": "user", "content": [{"type": 5, "text": "hi"}]}],
                                 "max_tokens": 2})
    expect(res.status == 400, f"want 400, got {res.status} {res.body[:200]!r}")
    return f"400 {error_message(j)[:80]!r}"


def probe_raw_byte_in_target(d):
    """h. POST /v1/models/<0xff>: 404 or 405, not 500."""
    data = harness.build_request("POST", b"/v1/models/\xff", b"{}", {"Connection": "close"})
    r = raw_exchange(d.port, data)
    expect(r.status in (404, 405), f"want 404/405, got {r.describe()}")
    return r.describe()


def probe_tokenize_1mb_keeps_health_fast(d):
    """i. Tokenizing 1 MB (POST /tokenize) does not stall /health (polled every 20 ms) beyond 300 ms."""
    content = ("Once upon a time there was a little girl named Lily. " * 20000)[:1_000_000]
    with LatencyPoller(d.port) as poll:
        time.sleep(0.1)
        t0 = time.monotonic()
        res = d.request("POST", "/tokenize", {"content": content}, timeout=120)
        took = time.monotonic() - t0
        time.sleep(0.1)
    expect(res.status == 200, f"/tokenize answered {res.status} {res.body[:200]!r}")
    n = len(res.json().get("tokens", []))
    worst = poll.worst()
    detail = f"{n} tokens in {took:.2f} s; /health worst {worst * 1000:.0f} ms over {len(poll.latencies)} polls"
    expect(worst <= 0.3 and poll.failures == 0, f"/health stalled: {detail}, {poll.failures} failed")
    return detail


def probe_cors_simple_request_blocked(d):
    """j. POST chat with Content-Type text/plain and a foreign Origin (no CORS configured): 403 and
    no generation (ember_generated_tokens_total unchanged)."""
    before = d.metrics()
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    res = d.request("POST", CHAT, body, {"Content-Type": "text/plain", "Origin": "http://evil.example"})
    time.sleep(0.3)
    after = d.metrics()
    gen = after.get("ember_generated_tokens_total", 0) - before.get("ember_generated_tokens_total", 0)
    jobs = sum(after.get(k, 0) - before.get(k, 0) for k in
               ("ember_jobs_completed_total", "ember_jobs_cancelled_total", "ember_jobs_failed_total"))
    detail = f"{res.status}, generated tokens +{gen:g}, jobs +{jobs:g}"
    expect(res.status == 403 and gen == 0 and jobs == 0, f"want 403 and no generation, got {detail}")
    return detail


def vocab_size(d):
    """n_vocab: the first id /detokenize refuses (binary search, about 20 requests)."""
    def valid(i):
        return d.request("POST", "/detokenize", {"tokens": [i]}).status == 200
    lo, hi = 0, 1 << 20  # lo: a valid id, hi: an invalid one
    expect(valid(lo), "/detokenize [0] is not 200")
    expect(not valid(hi), f"/detokenize accepts id {hi}")
    for _ in range(25):
        if hi - lo <= 1:
            break
        mid = (lo + hi) // 2
        if valid(mid):
            lo = mid
        else:
            hi = mid
    return hi


def probe_logit_bias_bans_everything(d):
    """k. logit_bias -100 for every token of the vocabulary: not a 200 full of token 0; a 200 with
    finish_reason "stop" and empty text, or a 400."""
    n_vocab = vocab_size(d)
    bias = {str(i): -100 for i in range(n_vocab)}
    res, j = post_json(d, COMPLETIONS, {"prompt": "Once upon a time", "max_tokens": 8, "logit_bias": bias,
                                        "temperature": 0})
    if res.status == 400:
        return f"n_vocab {n_vocab}: 400 {error_message(j)[:80]!r}"
    expect(res.status == 200, f"n_vocab {n_vocab}: {res.status} {res.body[:200]!r}")
    choice = j["choices"][0]
    text, finish = choice.get("text"), choice.get("finish_reason")
    detail = f"n_vocab {n_vocab}: 200 finish_reason {finish!r} text {text!r} usage {j.get('usage')}"
    expect(finish == "stop" and text == "", f"want stop with empty text or 400: {detail}")
    return detail


def probe_http10_stream(d):
    """l. An HTTP/1.0 streaming request: no chunked encoding, the SSE stream ended by the close."""
    body = {"prompt": "Once upon a time", "max_tokens": 8, "stream": True}
    data = harness.build_request("POST", COMPLETIONS, body, version="HTTP/1.0")
    conn = harness.Conn(d.port, 15)
    try:
        conn.send(data)
        res = conn.read_head()
        te = res.header("transfer-encoding")
        expect(res.status == 200, f"status {res.status}")
        expect(not te, f"Transfer-Encoding: {te} in an answer to HTTP/1.0")
        raw = conn.read_to_close()
        expect(conn.eof, "the connection was not closed at the end of the stream")
    finally:
        conn.close()
    text = raw.decode("utf-8", "replace")
    events = [e for e in harness.sse_events(text) if not e["comment"]]
    expect(events and events[-1]["data"] == "[DONE]", f"the body does not end with data: [DONE]: {text[-200:]!r}")
    expect(text.lstrip().startswith(("data:", ":")), f"the body is not plain SSE: {text[:80]!r}")
    return f"{res.version} {res.status}, {len(events)} events, closed"


def probe_two_host_headers(d):
    """m. Two Host headers: 400."""
    data = (b"GET /health HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
    r = raw_exchange(d.port, data)
    expect(r.status == 400, f"want 400, got {r.describe()}")
    return r.describe()


def probe_te_gzip_chunked(d):
    """n. Transfer-Encoding: gzip, chunked: 501."""
    body = json.dumps({"prompt": "hi", "max_tokens": 2}).encode()
    data = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n"
            + b"%x\r\n" % len(body) + body + b"\r\n0\r\n\r\n")
    r = raw_exchange(d.port, data)
    expect(r.status == 501, f"want 501, got {r.describe()}")
    return r.describe()


def probe_fifo_model(d):
    """o. A FIFO as the model: `ember run` fails within 5 s naming the path; `ember serve` fails
    within 5 s or exits promptly on SIGTERM."""
    tmp = tempfile.mkdtemp(prefix="ember-fifo-")
    fifo = os.path.join(tmp, "model.gguf")
    os.mkfifo(fifo)
    problems, details = [], []
    try:
        argv = [harness.ember_binary(), "run", "-m", fifo, "-p", "hi", "-n", "4"]
        p = subprocess.Popen(argv, env=harness.daemon_environment(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        try:
            out, _ = p.communicate(timeout=5)
            text = out.decode("utf-8", "replace")
            if p.returncode == 0:
                problems.append("ember run: exit 0")
            elif fifo not in text:
                problems.append(f"ember run: the error does not name the path: {text[-200:]!r}")
            else:
                details.append(f"run: exit {p.returncode} in {time.monotonic() - t0:.2f} s")
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate(timeout=10)
            problems.append("ember run: still running after 5 s (blocked opening the FIFO)")

        port = harness.free_port()
        argv = [harness.ember_binary(), "serve", "-m", fifo, "-t", "1", "--port", str(port)]
        p = subprocess.Popen(argv, env=harness.daemon_environment(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            p.wait(timeout=5)
            details.append(f"serve: exit {p.returncode} by itself")
            if p.returncode == 0:
                problems.append("ember serve: exit 0 with a FIFO model")
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGTERM)
            t1 = time.monotonic()
            try:
                p.wait(timeout=5)
                details.append(f"serve: still running at 5 s, exit {p.returncode} "
                               f"{time.monotonic() - t1:.2f} s after SIGTERM")
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
                problems.append("ember serve: did not exit within 5 s of SIGTERM (blocked opening the FIFO)")
        p.stdout.close()
    finally:
        # A process blocked in open(O_RDONLY) on the FIFO was killed above; unblock any straggler.
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
        os.unlink(fifo)
        os.rmdir(tmp)
    expect(not problems, "; ".join(problems + details))
    return "; ".join(details)


def probe_slowloris(d):
    """p. Slowloris: 5 connections sending one header byte per second for ~5 s; /health stays fast."""
    conns = []
    for _ in range(5):
        c = harness.Conn(d.port, 5)
        conns.append(c)
    header = b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: aaaaaaaaaaaaaaaa"
    with LatencyPoller(d.port, interval=0.05) as poll:
        for i in range(5):
            for c in conns:
                try:
                    c.send(header[i:i + 1])
                except OSError:
                    pass
            time.sleep(1.0)
    for c in conns:
        c.close()
    worst = poll.worst()
    detail = f"/health worst {worst * 1000:.0f} ms over {len(poll.latencies)} polls"
    expect(worst <= 0.3 and poll.failures == 0, f"{detail}, {poll.failures} failed")
    return detail


def probe_500_idle_connections(d):
    """p. 500 idle connections: /health still answers quickly."""
    conns = []
    try:
        for _ in range(500):
            conns.append(harness.Conn(d.port, 5))
        time.sleep(0.3)
        t0 = time.monotonic()
        ok = d.health_ok(timeout=5)
        lat = time.monotonic() - t0
        expect(ok and lat <= 1.0, f"/health with 500 idle connections: ok={ok} in {lat * 1000:.0f} ms")
        return f"/health {lat * 1000:.0f} ms with {len(conns)} idle connections"
    finally:
        for c in conns:
            c.close()


MALFORMED = [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET / HTTP/9.9\r\nHost: localhost\r\n\r\n",
    b"\x00\x01\x02\x03 / HTTP/1.1\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost localhost\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    b"POST /tokenize HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"G" * 10000 + b" / HTTP/1.1\r\n\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"GET /health HTTP/1.1\n\n",
    b"\r\n\r\n\r\n",
]


def probe_malformed_request_lines(d):
    """p. Malformed request lines and headers: 4xx or a close, never a 5xx other than 501/505, no hang."""
    seen, bad = [], []
    for data in MALFORMED:
        r = raw_exchange(d.port, data, timeout=5)
        if r.error and "timed out" in r.error:
            bad.append(f"{data[:30]!r}: no answer and no close in 5 s")
        elif r.status is not None and r.status >= 500 and r.status not in (501, 505):
            bad.append(f"{data[:30]!r}: {r.status}")
        seen.append(str(r.status) if r.status is not None else "close")
    expect(not bad, "; ".join(bad))
    return "answers: " + ",".join(seen)


def probe_deeply_nested_json(d):
    """p. 100k '[' as the body: 400, no crash."""
    res = d.request("POST", CHAT, b"[" * 100_000, timeout=15)
    expect(res.status == 400, f"want 400, got {res.status} {res.body[:120]!r}")
    return "400"


def probe_10mb_body(d):
    """p. A 10 MB body: 413."""
    size = 10 * 1024 * 1024
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % size)
    piece = b"x" * 65536
    r = raw_exchange(d.port, head, timeout=10, chunks=(piece for _ in range(size // len(piece))))
    expect(r.status == 413, f"want 413, got {r.describe()}")
    return r.describe()


def probe_invalid_utf8_json(d):
    """p. Invalid UTF-8 inside a JSON string: 400, not 500."""
    bodies = [b'{"messages":[{"role":"user","content":"\xff\xfe"}],"max_tokens":2}',
              b'{"prompt":"a\xc3\x28b","max_tokens":2}',
              b'{"content":"\xed\xa0\x80"}']
    paths = [CHAT, COMPLETIONS, "/tokenize"]
    out = []
    for path, body in zip(paths, bodies):
        res = d.request("POST", path, body)
        out.append(f"{path} {res.status}")
        expect(res.status == 400, f"{path}: want 400, got {res.status} {res.body[:120]!r}")
    return ", ".join(out)


PROBES = [
    ("a_chunked_trailer_65534_bytes", probe_chunked_trailer_64k),
    ("b_header_70000_bytes_with_1mib_limit", probe_header_70k_with_1mib_limit),
    ("c_2500_trailer_fields_of_60k", probe_many_large_trailers),
    ("d_empty_api_key_list_refused", probe_empty_api_key_lists),
    ("e_special_token_text_in_chat_content", probe_special_tokens_in_content),
    ("f_unsupported_fields_are_400", probe_unsupported_fields),
    ("g_content_part_type_not_string", probe_content_part_type_not_string),
    ("h_raw_byte_in_target", probe_raw_byte_in_target),
    ("i_tokenize_1mb_keeps_health_fast", probe_tokenize_1mb_keeps_health_fast),
    ("j_cors_text_plain_foreign_origin_403", probe_cors_simple_request_blocked),
    ("k_logit_bias_bans_every_token", probe_logit_bias_bans_everything),
    ("l_http10_stream_without_chunking", probe_http10_stream),
    ("m_two_host_headers_400", probe_two_host_headers),
    ("n_transfer_encoding_gzip_chunked_501", probe_te_gzip_chunked),
    ("o_fifo_model_path", probe_fifo_model),
    ("p_slowloris", probe_slowloris),
    ("p_500_idle_connections", probe_500_idle_connections),
    ("p_malformed_request_lines", probe_malformed_request_lines),
    ("p_deeply_nested_json", probe_deeply_nested_json),
    ("p_10mb_body_413", probe_10mb_body),
    ("p_invalid_utf8_in_json", probe_invalid_utf8_json),
]


def main():
    ap = argparse.ArgumentParser(description="Hostile HTTP input against ember serve.")
    ap.add_argument("-k", dest="pattern", default=None, help="only probes whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the probes and exit")
    ap.add_argument("--daemon-log", default=None, help="keep the shared daemon's output in this file")
    args = ap.parse_args()
    if args.list:
        for name, fn in PROBES:
            print(f"{name}: {fn.__doc__.splitlines()[0]}")
        return
    harness.skip_unless_ready()
    probes = [(n, f) for n, f in PROBES if not args.pattern or args.pattern in n]

    t_start = time.monotonic()
    passed, failed = [], []
    daemon = harness.Daemon(["--parallel", "2"], log_path=args.daemon_log).start()
    print(f"hostile: {' '.join(daemon.argv)} (pid {daemon.pid})", flush=True)
    try:
        for name, fn in probes:
            t0 = time.monotonic()
            ok, detail = True, ""
            try:
                detail = fn(daemon) or ""
            except ProbeFailure as e:
                ok, detail = False, str(e)
            except Exception as e:  # noqa: BLE001 - a probe that breaks is a failed probe
                ok, detail = False, f"{type(e).__name__}: {e}"
            # The daemon must have survived, and answer /health.
            time.sleep(0.05)
            if not daemon.alive():
                ok = False
                detail += (f" | the daemon DIED (exit {daemon.proc.returncode}); log tail: "
                           f"{daemon.log_tail(600)!r}")
            else:
                healthy = any(daemon.health_ok(timeout=5) or time.sleep(0.5) for _ in range(3))
                if not healthy:
                    ok = False
                    detail += " | /health is not 200 after the probe"
            took = time.monotonic() - t0
            print(f"{'PASS' if ok else 'FAIL'} {name} ({took:.1f} s): {detail}", flush=True)
            (passed if ok else failed).append(name)
            if not ok and (not daemon.alive() or not daemon.health_ok(timeout=2)):
                daemon.kill()
                daemon = harness.Daemon(["--parallel", "2"], log_path=args.daemon_log).start()
                print(f"hostile: restarted the daemon (pid {daemon.pid})", flush=True)
        rc, secs = daemon.stop()
        if rc != 0:
            failed.append("shutdown")
            print(f"FAIL shutdown: SIGTERM exit {rc} after {secs:.1f} s")
        log = daemon.log_text()
        if "ThreadSanitizer" in log or "AddressSanitizer" in log or "runtime error:" in log:
            failed.append("sanitizer")
            print(f"FAIL sanitizer: the daemon's log has a sanitizer report ({daemon.log_path})")
    finally:
        daemon.kill()
    print(f"hostile: {time.monotonic() - t_start:.1f} s; failed: {', '.join(failed) or 'none'}")
    print(f"{len(passed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
