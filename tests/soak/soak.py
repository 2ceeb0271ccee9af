#!/usr/bin/env python3
"""Soak test of `ember serve`: many concurrent streams, clients that vanish, for a while.

    tests/soak/soak.py                   # 60 s, 16 clients (CI)
    tests/soak/soak.py --seconds 600     # the 10-minute run
    EMBER_BINARY=build-tsan/ember tests/soak/soak.py --seconds 20 --rss-bound-mib 512

Starts the real daemon (`$EMBER_BINARY`, default build/ember) with the stories260K fixture
(`models/stories260K.gguf` in $EMBER_FIXTURES, else ../shared/fixtures, else tests/fixtures) on a
free 127.0.0.1 port with `--parallel 4 --queue 64`, warms it up, then runs --clients threads for
--seconds:

- "readers" (half the clients) send streaming chat / completions requests (random max_tokens,
  temperature, seed, sometimes stream_options.include_usage) over keep-alive connections and read
  every stream to its end; one request in five is non-streaming. Every stream must be 200
  text/event-stream, properly chunk-framed, its events JSON chunks of the right object kind with
  one id, no error event, a finish_reason, (with include_usage) a usage chunk whose total adds up,
  and exactly one final `data: [DONE]`.
- "vanishers" (the other half) disconnect at random points: mid-stream (after the header and
  0..n chunks), mid-request-header, mid-body, right after sending the request; half of the
  closes are resets (RST) instead of FIN.

Then it checks:
- no reader request failed (a 503 queue_full with Retry-After is counted, not a failure);
- /metrics adds up against what the clients saw (deltas since the end of the warm-up):
  ember_http_requests_total{endpoint,status="200"} grew by at least the completed requests of that
  endpoint; ember_jobs_{completed,cancelled,failed}_total together by at least completed +
  mid-stream disconnects; ember_jobs_failed_total by 0; ember_generated_tokens_total and
  ember_prompt_tokens_total by at least the usage the clients were given; once idle,
  ember_http_active_requests is 1 (the /metrics request itself), ember_active_requests and
  ember_queue_depth are 0;
- RSS (VmRSS of /proc/PID/status) at the end is within --rss-bound-mib (default 64 MiB) of its
  value after the warm-up. Why 64 MiB: the model is 1.2 MB and the KV caches of the 4 slots are
  allocated at startup, so a healthy daemon's steady state does not depend on how many requests it
  served. What may legitimately differ between the two samples is transient: the buffers of at
  most --clients open connections (each stream's backlog is capped at max_stream_backlog_bytes,
  1 MiB by default: 16 MiB for 16 clients) plus glibc malloc keeping freed memory in its per-thread
  arenas (a few MiB each for the I/O and engine threads). 64 MiB is well above that, and
  well below what a leak would add: a 60 s run makes thousands of requests and a 10-minute run tens
  of thousands, so a leak of a few KiB per request (one lost request object, buffer or job) blows
  through it. The RSS is sampled every second; the summary shows the curve's minimum, maximum and
  end;
- /health is 200 and the process is alive; SIGTERM then exits 0 within 15 s; the daemon's log has
  no sanitizer report.

Prints a summary; exits 1 on any failure, 77 ("SKIPPED: ...") when the binary or fixture is absent.
Traffic only ever goes to 127.0.0.1; every loop is bounded in count and time.
"""

import argparse
import json
import os
import random
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__/ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

PROMPTS = [
    "Once upon a time",
    "Lily and Tom went to the park",
    "The little dog was sad because",
    "One day, a big bird",
    "Sam had a red ball. He",
    "There was a girl named Sue who liked to",
]
ENDPOINTS = ("/v1/chat/completions", "/v1/completions")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.completed = {e: 0 for e in ENDPOINTS}       # 200 and fully read and valid
        self.completed_stream = 0
        self.completed_plain = 0
        self.queue_full = 0                               # 503 + Retry-After
        self.failures = []                                # (kind, message)
        self.vanish = {"mid_stream": 0, "mid_header": 0, "mid_body": 0, "after_send": 0}
        self.mid_stream_with_header = 0                   # saw the 200 SSE header, then left
        self.resets = 0
        self.usage_prompt = 0
        self.usage_completion = 0
        self.max_latency = 0.0
        self.chunks = 0

    def fail(self, kind, msg):
        with self.lock:
            self.failures.append((kind, msg[:500]))

    def completed_one(self, endpoint, stream, usage, nchunks=0):
        """A request read to its end and valid; `usage` may be None (a stream without include_usage)."""
        with self.lock:
            self.completed[endpoint] += 1
            if stream:
                self.completed_stream += 1
                self.chunks += nchunks
            else:
                self.completed_plain += 1
            if usage:
                self.usage_prompt += usage["prompt_tokens"]
                self.usage_completion += usage["completion_tokens"]


def make_body(rng, endpoint, stream):
    body = {
        "max_tokens": rng.randint(1, 48),
        "temperature": rng.choice([0.0, 0.7, 1.0]),
        "seed": rng.randint(0, 1 << 30),
    }
    if endpoint == "/v1/chat/completions":
        body["messages"] = [{"role": "user", "content": rng.choice(PROMPTS)}]
    else:
        body["prompt"] = rng.choice(PROMPTS)
    include_usage = False
    if stream:
        body["stream"] = True
        if rng.random() < 0.5:
            body["stream_options"] = {"include_usage": True}
            include_usage = True
    return body, include_usage


def check_stream(endpoint, res, body_text, include_usage):
    """Returns (error message or None, usage or None, chunk count)."""
    if res.status != 200:
        return f"status {res.status}: {body_text[:200]}", None, 0
    if not (res.header("content-type") or "").startswith("text/event-stream"):
        return f"content-type {res.header('content-type')}", None, 0
    if not res.complete:
        return "the chunked body did not end with its last chunk", None, 0
    events = [e for e in harness.sse_events(body_text) if not e["comment"]]
    if not events:
        return "no events", None, 0
    if events[-1]["data"] != "[DONE]":
        return f"last event is not [DONE]: {events[-1]['raw'][:200]!r}", None, 0
    if sum(1 for e in events if e["data"] == "[DONE]") != 1:
        return "more than one [DONE]", None, 0
    obj_name = "chat.completion.chunk" if endpoint == "/v1/chat/completions" else "text_completion"
    chunks = []
    for e in events[:-1]:
        try:
            j = json.loads(e["data"])
        except (TypeError, ValueError):
            return f"event is not JSON: {e['raw'][:200]!r}", None, 0
        if not isinstance(j, dict):
            return f"event is not an object: {e['raw'][:200]!r}", None, 0
        if "error" in j:
            return f"error event: {e['raw'][:300]!r}", None, 0
        if j.get("object") != obj_name:
            return f"object {j.get('object')!r} != {obj_name}", None, 0
        chunks.append(j)
    if not chunks:
        return "no chunk before [DONE]", None, 0
    if len({c.get("id") for c in chunks}) != 1:
        return "chunks with different ids", None, 0
    usage = None
    body_chunks = chunks
    if include_usage:
        last = chunks[-1]
        if last.get("choices") != [] or not isinstance(last.get("usage"), dict):
            return f"no usage chunk before [DONE]: {json.dumps(last)[:200]}", None, 0
        usage = last["usage"]
        if usage.get("total_tokens") != usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0):
            return f"usage does not add up: {usage}", None, 0
        body_chunks = chunks[:-1]
    finishes = [c["choices"][0].get("finish_reason") for c in body_chunks
                if c.get("choices") and c["choices"][0].get("finish_reason")]
    if len(finishes) != 1 or finishes[0] not in ("stop", "length"):
        return f"finish_reason(s) {finishes}", None, 0
    return None, usage, len(chunks)


def check_plain(endpoint, res):
    if res.status != 200:
        return f"status {res.status}: {res.body[:200]!r}", None
    try:
        j = res.json()
    except ValueError:
        return f"body is not JSON: {res.body[:200]!r}", None
    obj_name = "chat.completion" if endpoint == "/v1/chat/completions" else "text_completion"
    if j.get("object") != obj_name:
        return f"object {j.get('object')!r}", None
    u = j.get("usage") or {}
    if u.get("total_tokens") != u.get("prompt_tokens", -1) + u.get("completion_tokens", -1):
        return f"usage {u}", None
    if j["choices"][0].get("finish_reason") not in ("stop", "length"):
        return f"finish_reason {j['choices'][0].get('finish_reason')!r}", None
    return None, u


def reader(cid, daemon, deadline, stats, seed, plain_share):
    rng = random.Random(seed)
    conn = None
    n = 0
    while time.monotonic() < deadline and n < 1_000_000:
        n += 1
        endpoint = rng.choice(ENDPOINTS)
        stream = rng.random() >= plain_share
        body, include_usage = make_body(rng, endpoint, stream)
        t0 = time.monotonic()
        try:
            if conn is None:
                conn = harness.Conn(daemon.port, timeout=30.0)
            conn.send(harness.build_request("POST", endpoint, body))
            res = conn.read_head()
            if res.status == 503 and res.header("retry-after"):
                res.body = b"".join(conn.body_pieces(res, "POST"))
                with stats.lock:
                    stats.queue_full += 1
                time.sleep(0.05)
            elif stream:
                text = b"".join(conn.body_pieces(res, "POST")).decode("utf-8", "replace")
                err, usage, nchunks = check_stream(endpoint, res, text, include_usage)
                if err:
                    stats.fail("stream", f"client {cid} {endpoint}: {err}")
                else:
                    stats.completed_one(endpoint, True, usage, nchunks)
            else:
                res.body = b"".join(conn.body_pieces(res, "POST"))
                err, usage = check_plain(endpoint, res)
                if err:
                    stats.fail("plain", f"client {cid} {endpoint}: {err}")
                else:
                    stats.completed_one(endpoint, False, usage)
            lat = time.monotonic() - t0
            with stats.lock:
                stats.max_latency = max(stats.max_latency, lat)
            if "close" in (res.header("connection") or "").lower():
                conn.close()
                conn = None
        except (OSError, EOFError, ValueError) as e:
            # The request itself, so that a hang can be replayed.
            stats.fail("reader-io", f"client {cid} {endpoint}: {type(e).__name__}: {e} "
                                    f"after {time.monotonic() - t0:.1f} s; request {json.dumps(body)}")
            if conn:
                conn.close()
            conn = None
            time.sleep(0.1)
    if conn:
        conn.close()


def vanisher(cid, daemon, deadline, stats, seed):
    rng = random.Random(seed)
    n = 0
    while time.monotonic() < deadline and n < 1_000_000:
        n += 1
        endpoint = rng.choice(ENDPOINTS)
        body, _ = make_body(rng, endpoint, stream=True)
        body["max_tokens"] = rng.randint(16, 200)  # long enough to be cut off while generating
        raw = harness.build_request("POST", endpoint, body)
        head_len = raw.index(b"\r\n\r\n") + 4
        mode = rng.choice(["mid_stream", "mid_stream", "mid_header", "mid_body", "after_send"])
        reset = rng.random() < 0.5
        conn = None
        try:
            conn = harness.Conn(daemon.port, timeout=30.0)
            if mode == "mid_header":
                conn.send(raw[:rng.randint(1, head_len - 1)])
            elif mode == "mid_body":
                conn.send(raw[:rng.randint(head_len, len(raw) - 1)])
            elif mode == "after_send":
                conn.send(raw)
            else:
                conn.send(raw)
                res = conn.read_head()
                if res.status == 200:
                    with stats.lock:
                        stats.mid_stream_with_header += 1
                    want = rng.randint(0, 8)
                    got = 0
                    for _piece in conn.body_pieces(res, "POST"):
                        got += 1
                        if got >= want:
                            break
                elif res.status == 503:
                    with stats.lock:
                        stats.queue_full += 1
                else:
                    stats.fail("vanisher", f"client {cid}: status {res.status}")
            if rng.random() < 0.3:
                time.sleep(rng.uniform(0, 0.05))  # leave the half request hanging a moment
            with stats.lock:
                stats.vanish[mode] += 1
                stats.resets += reset
        except (OSError, EOFError, ValueError) as e:
            stats.fail("vanisher-io", f"client {cid} {mode}: {type(e).__name__}: {e}")
            time.sleep(0.1)
        finally:
            if conn:
                conn.close(reset=reset)
        time.sleep(rng.uniform(0, 0.02))


def warm_up(daemon, seconds, rng):
    """Every slot busy a few times, a few cancellations; returns the number of requests."""
    stats = Stats()
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=reader, args=(100 + i, daemon, deadline, stats, rng.random(), 0.2))
               for i in range(4)]
    threads += [threading.Thread(target=vanisher, args=(200 + i, daemon, deadline, stats, rng.random()))
                for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    return stats


def settle(daemon, timeout=20.0):
    """Waits until the daemon is idle: no job queued or running, only the /metrics request active."""
    deadline = time.monotonic() + timeout
    m = daemon.metrics()
    while time.monotonic() < deadline:
        m = daemon.metrics()
        if (m.get("ember_active_requests", -1) == 0 and m.get("ember_queue_depth", -1) == 0
                and m.get("ember_http_active_requests", -1) <= 1):
            return True, m
        time.sleep(0.2)
    return False, m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="length of the soak phase (default 60)")
    ap.add_argument("--clients", type=int, default=16, help="concurrent clients, half of them vanish (default 16)")
    ap.add_argument("--parallel", type=int, default=4, help="ember serve --parallel (default 4)")
    ap.add_argument("--warmup-seconds", type=float, default=5.0, help="warm-up before the RSS baseline (default 5)")
    ap.add_argument("--rss-bound-mib", type=float, default=64.0,
                    help="allowed RSS growth from the end of the warm-up to the end (default 64)")
    ap.add_argument("--plain-share", type=float, default=0.2, help="share of non-streaming reader requests")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    ap.add_argument("--daemon-log", default=None, help="keep the daemon's output in this file")
    ap.add_argument("--startup-timeout", type=float, default=30.0, help="seconds to wait for /health")
    ap.add_argument("--threads", type=int, default=1, help="ember serve -t (default 1)")
    ap.add_argument("--io-threads", type=int, default=1, help="ember serve --io-threads (default 1)")
    args = ap.parse_args()

    harness.skip_unless_ready()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    failures = []

    daemon = harness.Daemon(["--parallel", str(args.parallel), "--queue", "64", "--io-threads", str(args.io_threads)],
                            log_path=args.daemon_log, ready_timeout=args.startup_timeout, threads=args.threads)
    if args.daemon_log and os.path.exists(args.daemon_log):
        os.unlink(args.daemon_log)
    t_start = time.monotonic()
    daemon.start()
    try:
        print(f"soak: {' '.join(daemon.argv)} (pid {daemon.pid}), seed {seed}, {args.clients} clients, "
              f"{args.seconds:g} s", flush=True)
        rss_start = daemon.rss_kib()
        wstats = warm_up(daemon, args.warmup_seconds, rng)
        if wstats.failures:
            failures += [f"warm-up {k}: {m}" for k, m in wstats.failures[:10]]
        ok, m0 = settle(daemon)
        if not ok:
            failures.append("not idle after the warm-up")
        rss_warm = daemon.rss_kib()

        # -- the soak proper ----------------------------------------------------------------
        stats = Stats()
        deadline = time.monotonic() + args.seconds
        threads = []
        for i in range(args.clients):
            if i % 2 == 0:
                t = threading.Thread(target=reader, args=(i, daemon, deadline, stats, rng.random(), args.plain_share))
            else:
                t = threading.Thread(target=vanisher, args=(i, daemon, deadline, stats, rng.random()))
            t.daemon = True
            threads.append(t)
        rss_samples = []
        t_soak = time.monotonic()
        for t in threads:
            t.start()
        while time.monotonic() < deadline and daemon.alive():
            r = daemon.rss_kib()
            if r:
                rss_samples.append(r)
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        for t in threads:
            t.join(max(1.0, deadline + 90 - time.monotonic()))
        soak_wall = time.monotonic() - t_soak
        if any(t.is_alive() for t in threads):
            failures.append("a client thread did not finish within 90 s of the deadline (a stuck request)")

        alive = daemon.alive()
        if not alive:
            failures.append(f"the daemon died during the soak (exit {daemon.proc.returncode})")
        idle, m1 = (settle(daemon) if alive else (False, {}))
        if alive and not idle:
            failures.append("not idle 20 s after the clients stopped: "
                            f"ember_active_requests={m1.get('ember_active_requests')}, "
                            f"ember_queue_depth={m1.get('ember_queue_depth')}, "
                            f"ember_http_active_requests={m1.get('ember_http_active_requests')} (1 = this /metrics)")
        rss_end = daemon.rss_kib() if alive else None

        for kind, msg in stats.failures[:20]:
            failures.append(f"{kind}: {msg}")
        if len(stats.failures) > 20:
            failures.append(f"... and {len(stats.failures) - 20} more client failures")

        # -- metrics add up ------------------------------------------------------------------
        completed_total = sum(stats.completed.values())
        if alive and m1:
            def d(key):
                return m1.get(key, 0.0) - m0.get(key, 0.0)
            for ep in ENDPOINTS:
                grew = harness.http_requests_total(m1, ep, 200) - harness.http_requests_total(m0, ep, 200)
                if grew < stats.completed[ep]:
                    failures.append(f'ember_http_requests_total{{endpoint="{ep}",status="200"}} grew by {grew:.0f} '
                                    f"< {stats.completed[ep]} completed")
            jobs = d("ember_jobs_completed_total") + d("ember_jobs_cancelled_total") + d("ember_jobs_failed_total")
            if jobs < completed_total + stats.mid_stream_with_header:
                failures.append(f"jobs completed+cancelled+failed grew by {jobs:.0f} < {completed_total} completed + "
                                f"{stats.mid_stream_with_header} streams left mid-way")
            if d("ember_jobs_completed_total") < completed_total:
                failures.append(f"ember_jobs_completed_total grew by {d('ember_jobs_completed_total'):.0f} "
                                f"< {completed_total} completed")
            if d("ember_jobs_failed_total") != 0:
                failures.append(f"ember_jobs_failed_total grew by {d('ember_jobs_failed_total'):.0f}")
            if d("ember_generated_tokens_total") < stats.usage_completion:
                failures.append(f"ember_generated_tokens_total grew by {d('ember_generated_tokens_total'):.0f} "
                                f"< {stats.usage_completion} completion tokens reported in usage")
            if d("ember_prompt_tokens_total") < stats.usage_prompt:
                failures.append(f"ember_prompt_tokens_total grew by {d('ember_prompt_tokens_total'):.0f} "
                                f"< {stats.usage_prompt} prompt tokens reported in usage")
            if stats.mid_stream_with_header >= 20 and d("ember_jobs_cancelled_total") == 0:
                failures.append(f"{stats.mid_stream_with_header} streams left mid-way, "
                                "ember_jobs_cancelled_total did not grow")
        if completed_total == 0:
            failures.append("no request completed")

        # -- RSS -----------------------------------------------------------------------------
        growth_mib = None
        if rss_end is not None and rss_warm is not None:
            growth_mib = (rss_end - rss_warm) / 1024.0
            if growth_mib > args.rss_bound_mib:
                failures.append(f"RSS grew by {growth_mib:.1f} MiB after the warm-up (> {args.rss_bound_mib:g} MiB)")

        # -- health, liveness, shutdown ------------------------------------------------------
        if alive and not daemon.health_ok():
            failures.append("/health is not 200 after the soak")
        rc, stop_s = daemon.stop(signal.SIGTERM, 15.0)
        if rc != 0:
            failures.append(f"SIGTERM: exit status {rc} (want 0) after {stop_s:.1f} s")
        log = daemon.log_text()
        for marker in ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer"):
            if marker in log:
                failures.append(f"the daemon's log has a sanitizer report ({marker}); see "
                                f"{daemon.log_path}")

        # -- summary -------------------------------------------------------------------------
        mib = (lambda k: f"{k / 1024.0:.1f}" if k else "?")
        total_req = completed_total + sum(stats.vanish.values())
        print(f"soak: {soak_wall:.1f} s, {args.clients} clients (--parallel {args.parallel}), seed {seed}")
        print(f"  completed: {completed_total} ({stats.completed_stream} streams, {stats.completed_plain} plain; "
              + ", ".join(f"{e} {n}" for e, n in stats.completed.items())
              + f"), {stats.chunks} chunks, {total_req / max(soak_wall, 1e-9):.1f} req/s")
        print(f"  vanished: {sum(stats.vanish.values())} ("
              + ", ".join(f"{k} {v}" for k, v in stats.vanish.items())
              + f"; {stats.mid_stream_with_header} after the SSE header; {stats.resets} by RST)")
        print(f"  503 queue_full: {stats.queue_full}; client failures: {len(stats.failures)}; "
              f"slowest reader request {stats.max_latency:.2f} s")
        if alive and m1:
            print("  metrics delta: "
                  f"jobs completed {m1.get('ember_jobs_completed_total', 0) - m0.get('ember_jobs_completed_total', 0):.0f}, "
                  f"cancelled {m1.get('ember_jobs_cancelled_total', 0) - m0.get('ember_jobs_cancelled_total', 0):.0f}, "
                  f"failed {m1.get('ember_jobs_failed_total', 0) - m0.get('ember_jobs_failed_total', 0):.0f}; "
                  f"generated tokens {m1.get('ember_generated_tokens_total', 0) - m0.get('ember_generated_tokens_total', 0):.0f} "
                  f"(usage seen {stats.usage_completion})")
        print(f"  RSS MiB: start {mib(rss_start)}, after warm-up {mib(rss_warm)}, during min "
              f"{mib(min(rss_samples) if rss_samples else None)} max {mib(max(rss_samples) if rss_samples else None)}, "
              f"end {mib(rss_end)}; growth "
              f"{'?' if growth_mib is None else f'{growth_mib:+.1f}'} MiB (bound {args.rss_bound_mib:g})")
        print(f"  SIGTERM: exit {rc} in {stop_s:.2f} s; total wall {time.monotonic() - t_start:.1f} s")
    except Exception as e:  # noqa: BLE001 - report and fail, never hang
        failures.append(f"soak aborted: {type(e).__name__}: {e}")
    finally:
        daemon.kill()

    if failures:
        print(f"FAIL: {len(failures)} problem(s):")
        for f in failures:
            print(f"  - {f}")
        print(f"  daemon log: {daemon.log_path}")
        print("--- daemon log tail ---\n" + daemon.log_tail(3000))
        sys.exit(1)
    print("PASS")
    if daemon.own_log:
        try:
            os.unlink(daemon.log_path)
        except OSError:
            pass


if __name__ == "__main__":
    main()
