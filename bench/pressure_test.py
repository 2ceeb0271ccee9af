#!/usr/bin/env python3
"""Memory-pressure elasticity, end to end: `ember serve` on a pack under a memory budget shares a
cgroup v1 memory limit with a competitor that allocates until the group is short of memory. Ember
must see the pressure (PSI), shrink its neuron cache, keep answering every request, not be
OOM-killed, and grow the cache back once the competitor has exited.

usage: sudo bench/pressure_test.py --pack PACK [--ember build/ember] [--budget 60%]
                                   [--headroom-mib 48] [--hog-share 0.6] [--hold 20] [--regrow 70]
                                   [--swap zram|none] [--swap-mib 1024] [--out DIR]

Timeline: start the daemon in a fresh memory cgroup (no limit), warm it up with requests, then set
the group's limit to what it uses plus --headroom-mib. A client sends completions all along. The
competitor, in the same group, allocates --hog-share of (budget - minimum budget) in 16 MiB steps
(writing every page with incompressible bytes), holds it --hold seconds and exits; the test then
waits --regrow seconds. A phone swaps to compressed RAM (zram): with --swap zram (the default
where /sys/block/zram0 exists and no swap is on) the test does too, for its duration, so the group
over its limit swaps and stalls (what PSI measures) instead of being OOM-killed at once, which is
what happens to a group of anonymous memory without swap: no stall, no warning, a kill.
Every 0.25 s it records the daemon's budget in force (/metrics), its RSS, the group's usage and the
PSI "some" avg10. Writes timeline.csv, results.json and summary.md under --out (default
bench/results/pressure-<UTC date>/). A benchmark-style script, not a unit test: it needs root, a
cgroup v1 memory controller and a kernel with PSI; exit 0 only when every check passed.
"""
import argparse
import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

CGROUP_MOUNT = "/sys/fs/cgroup/memory"
MIB = 1 << 20


def fail(msg):
    print(f"pressure_test: {msg}", file=sys.stderr)
    sys.exit(2)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, path, body=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def metric(text, name):
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


def rss_bytes(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def psi_some_avg10():
    with open("/proc/pressure/memory") as f:
        return float(re.search(r"some avg10=(\S+)", f.read()).group(1))


# The competitor: allocates TARGET MiB in 16 MiB steps of random bytes (zram cannot compress them
# away), holds them, exits.
HOG = r"""
import os, sys, time
target, hold = int(sys.argv[1]), float(sys.argv[2])
blocks = []
while len(blocks) * 16 < target:
    blocks.append(bytearray(os.urandom(1 << 20) * 16))
    print(len(blocks) * 16, flush=True)
    time.sleep(0.25)
time.sleep(hold)
"""


def swaps_on():
    with open("/proc/swaps") as f:
        return len(f.read().strip().splitlines()) > 1


class ZramSwap:
    """/dev/zram0 as swap while the test runs (left as it was found: reset afterwards)."""

    def __init__(self, mib):
        self.on = False
        with open("/sys/block/zram0/disksize", "w") as f:
            f.write(str(mib * MIB))
        subprocess.run(["mkswap", "/dev/zram0"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["swapon", "/dev/zram0"], check=True)
        self.on = True

    def close(self):
        if self.on:
            subprocess.run(["swapoff", "/dev/zram0"], check=False)
        with open("/sys/block/zram0/reset", "w") as f:
            f.write("1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pack", required=True)
    ap.add_argument("--ember", default=os.path.join(os.path.dirname(__file__), "..", "build", "ember"))
    ap.add_argument("--budget", default="60%")
    ap.add_argument("--headroom-mib", type=int, default=48)
    ap.add_argument("--hog-share", type=float, default=0.6)
    ap.add_argument("--hold", type=float, default=20)
    ap.add_argument("--regrow", type=float, default=70)
    ap.add_argument("--swap", choices=["zram", "none"], default=None)
    ap.add_argument("--swap-mib", type=int, default=1024)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.swap is None:
        a.swap = "zram" if os.path.exists("/sys/block/zram0") and not swaps_on() else "none"
    if os.geteuid() != 0:
        fail("needs root (a cgroup v1 memory group)")
    if not os.path.exists(f"{CGROUP_MOUNT}/memory.limit_in_bytes"):
        fail(f"no cgroup v1 memory controller at {CGROUP_MOUNT}")
    if not os.path.exists("/proc/pressure/memory"):
        fail("the kernel has no PSI (/proc/pressure/memory)")
    stamp = datetime.datetime.utcnow().strftime("%Y%m%d-%H%M")
    out = a.out or os.path.join(os.path.dirname(__file__), "results", f"pressure-{stamp}")
    os.makedirs(out, exist_ok=True)

    cg = f"{CGROUP_MOUNT}/ember-pressure-{os.getpid()}"
    os.mkdir(cg)
    procs = []
    swap = ZramSwap(a.swap_mib) if a.swap == "zram" else None

    def enter_cgroup():
        with open(f"{cg}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    port = free_port()
    log = open(os.path.join(out, "ember.log"), "w")
    ember = subprocess.Popen([a.ember, "serve", "-m", a.pack, "--port", str(port), "--memory-budget", a.budget,
                              "--sparse", "predictor", "--activation-state", "", "-t", "2"],
                             stdout=log, stderr=subprocess.STDOUT, preexec_fn=enter_cgroup)
    procs.append(ember)
    samples, answers, stop = [], [], threading.Event()
    try:
        for _ in range(600):
            try:
                if http(port, "/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if ember.poll() is not None:
                fail(f"ember serve exited ({ember.returncode}); see {out}/ember.log")
            time.sleep(0.2)
        body = {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0}
        for _ in range(3):
            http(port, "/v1/completions", body)  # warm-up: the cache fills, the page cache too
        metrics = http(port, "/metrics")[1]
        configured = metric(metrics, "ember_memory_configured_budget_bytes")
        if not configured:
            fail("/metrics has no ember_memory_configured_budget_bytes (no memory budget in force?)")
        minimum_line = [l for l in open(os.path.join(out, "ember.log")) if "watching memory pressure" in l]
        if not minimum_line:
            fail(f"the daemon does not watch memory pressure; see {out}/ember.log")
        usage0 = read_int(f"{cg}/memory.usage_in_bytes")
        limit = usage0 + a.headroom_mib * MIB
        with open(f"{cg}/memory.limit_in_bytes", "w") as f:
            f.write(str(limit))
        minimum = float(re.search(r"shrinks toward (\d+) MiB", minimum_line[0]).group(1)) * MIB
        hog_mib = int(a.hog_share * (configured - minimum) / MIB)
        t0 = time.monotonic()
        events = {}

        def client():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    status, raw = http(port, "/v1/completions", body)
                    answer = json.loads(raw)
                    tokens, text = answer["usage"]["completion_tokens"], answer["choices"][0]["text"]
                except Exception as e:  # noqa: BLE001 - every failure is a finding
                    status, tokens, text = f"error: {e}", 0, ""
                answers.append({"t": round(t - t0, 2), "status": status, "seconds": time.monotonic() - t,
                                "tokens": tokens, "text": text})

        def sampler():
            while not stop.is_set():
                try:
                    m = http(port, "/metrics", timeout=5)[1]
                    budget = metric(m, "ember_memory_budget_bytes")
                    shrinks = metric(m, 'ember_memory_budget_changes_total{direction="shrink"}')
                    regrows = metric(m, 'ember_memory_budget_changes_total{direction="regrow"}')
                except Exception:  # noqa: BLE001
                    budget = shrinks = regrows = None
                samples.append({"t": round(time.monotonic() - t0, 2), "budget_mib": budget and budget / MIB,
                                "ember_rss_mib": rss_bytes(ember.pid) / MIB,
                                "cgroup_usage_mib": read_int(f"{cg}/memory.usage_in_bytes") / MIB,
                                "psi_some_avg10": psi_some_avg10(), "shrinks": shrinks, "regrows": regrows})
                time.sleep(0.25)

        threads = [threading.Thread(target=client), threading.Thread(target=sampler)]
        for t in threads:
            t.start()
        time.sleep(5)
        events["hog_start"] = time.monotonic() - t0
        hog = subprocess.Popen([sys.executable, "-c", HOG, str(hog_mib), str(a.hold)],
                               stdout=subprocess.PIPE, text=True, preexec_fn=enter_cgroup)
        procs.append(hog)
        hog_out = hog.communicate()[0]
        events["hog_end"] = time.monotonic() - t0
        hog_reached = int(hog_out.split()[-1]) if hog_out.split() else 0
        time.sleep(a.regrow)
        stop.set()
        for t in threads:
            t.join()
        events["end"] = time.monotonic() - t0
        failcnt = read_int(f"{cg}/memory.failcnt")
        oom_kills = 0
        with open(f"{cg}/memory.oom_control") as f:
            m = re.search(r"oom_kill (\d+)", f.read())
            oom_kills = int(m.group(1)) if m else 0
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for _ in range(20):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.5)
        if swap:
            swap.close()

    budgets = [s["budget_mib"] for s in samples if s["budget_mib"]]
    during = [s for s in samples if events["hog_start"] <= s["t"] <= events["hog_end"]]
    lowest = min((s["budget_mib"] for s in during if s["budget_mib"]), default=None)
    final = budgets[-1] if budgets else None
    ok_answers = [x for x in answers if x["status"] == 200]
    texts = {x["text"] for x in ok_answers}
    checks = {
        "ember alive after the competitor (not OOM-killed)": ember.returncode in (0, None) and oom_kills == 0,
        "competitor reached its allocation": hog_reached >= hog_mib,
        "budget lowered under pressure": lowest is not None and lowest < configured / MIB,
        "budget back to the configured one at the end": final is not None and abs(final - configured / MIB) < 1,
        "every request answered 200": len(ok_answers) == len(answers) and len(answers) > 0,
        "every answer the same greedy text": len(texts) == 1,
    }

    def phase_tok_s(lo, hi):
        xs = [x for x in ok_answers if lo <= x["t"] < hi]
        secs = sum(x["seconds"] for x in xs)
        return round(sum(x["tokens"] for x in xs) / secs, 2) if secs else None

    result = {
        "pack": a.pack, "budget": a.budget, "swap": a.swap, "configured_budget_mib": configured / MIB, "minimum_budget_mib": minimum / MIB,
        "cgroup_limit_mib": limit / MIB, "usage_before_mib": usage0 / MIB, "hog_mib": hog_mib, "hog_reached_mib": hog_reached,
        "lowest_budget_mib": lowest, "final_budget_mib": final, "events": events, "requests": len(answers),
        "requests_ok": len(ok_answers), "cgroup_failcnt": failcnt, "oom_kills": oom_kills,
        "tok_s_before": phase_tok_s(0, events["hog_start"]),
        "tok_s_under_pressure": phase_tok_s(events["hog_start"], events["hog_end"]),
        "tok_s_after": phase_tok_s(events["hog_end"] + a.regrow / 2, events["end"]),
        "checks": checks,
    }
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({**result, "answers": answers}, f, indent=1)
    with open(os.path.join(out, "timeline.csv"), "w") as f:
        keys = list(samples[0].keys()) if samples else []
        f.write(",".join(keys) + "\n")
        for s in samples:
            f.write(",".join("" if s[k] is None else str(s[k]) for k in keys) + "\n")
    lines = [f"# Memory pressure: {os.path.basename(a.pack)}, budget {a.budget}, swap {a.swap}", "",
             "| | |", "|---|---|"]
    for k in ("configured_budget_mib", "minimum_budget_mib", "usage_before_mib", "cgroup_limit_mib", "hog_mib",
              "hog_reached_mib", "lowest_budget_mib", "final_budget_mib", "requests", "requests_ok",
              "tok_s_before", "tok_s_under_pressure", "tok_s_after", "cgroup_failcnt", "oom_kills"):
        v = result[k]
        lines.append(f"| {k} | {round(v, 1) if isinstance(v, float) else v} |")
    lines += ["", "| check | |", "|---|---|"] + [f"| {k} | {'ok' if v else 'FAILED'} |" for k, v in checks.items()]
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"pressure_test: results in {out}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
