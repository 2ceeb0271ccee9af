#!/usr/bin/env python3
"""Tables, results.json and plots of a bench/memcap_bench.sh run.

usage: bench/memcap_report.py OUT_DIR

Reads OUT_DIR/runs.jsonl (one line per process), settings.json, machine.txt and fio.jsonl; writes
OUT_DIR/results.json (machine, settings, medians per configuration, goals, every run), table.md
(printed too) and, when gnuplot is installed, tokens_per_s.png and ttft.png with the data and the
gnuplot script that drew them (plot.dat, plot.gp) so they can be redrawn by hand.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys

ENGINE_NAMES = {"llama.cpp": "llama.cpp", "ember-dense": "Ember dense", "ember-sparse": "Ember sparse"}
ENGINE_ORDER = ["llama.cpp", "ember-dense", "ember-sparse"]
VARIANT_TEXT = {
    ("llama.cpp", "repack"): "default: Q4_0 repacked, mmap",
    ("llama.cpp", "mmap"): "mmap, no repack",
    ("ember-dense", "repack"): "default (Q4_0 repacked, mmap)",
    ("ember-dense", "no-repack"): "mmap, --no-repack",
    ("ember-sparse", "all-in-RAM"): "pack all in RAM",
    ("ember-sparse", "budget"): "pack, --memory-budget",
    ("ember-sparse", "budget-no-prefetch"): "pack, --no-prefetch, --memory-budget",
    ("ember-sparse", "budget-prefetch"): "pack, --prefetch, --memory-budget",
}
# The memory-cap goals: (description, engine, cap, minimum ratio of its decode tok/s to llama.cpp's
# best at that cap, minimum decode tok/s). A goal whose cap the run did not include is left out.
# The percentage caps are the dense-shaped (mistral-7b) benchmark's, the sizes the Mixtral-8x7B
# shape's (bench/README.md).
GOALS = [
    ("50% cap: Ember sparse >= 10x llama.cpp", "ember-sparse", "50%", 10.0, None),
    ("unlimited: Ember sparse >= 2.5x llama.cpp dense", "ember-sparse", "unlimited", 2.5, None),
    ("unlimited: Ember dense >= 1.0x llama.cpp dense", "ember-dense", "unlimited", 1.0, None),
    ("16 GiB cap: Ember sparse >= 15x llama.cpp and >= 3 tok/s", "ember-sparse", "16G", 15.0, 3.0),
    ("10 GiB cap: Ember sparse >= 1.5 tok/s", "ember-sparse", "10G", None, 1.5),
]


def load_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_kv(path):
    facts = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                key, sep, value = line.rstrip("\n").partition("=")
                if sep:
                    facts[key] = value
    return facts


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def maximum(values):
    values = [v for v in values if v is not None]
    return max(values) if values else None


def dig(obj, *keys):
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def ttft_ms(run):
    """Prompt prefill plus one decode step, from the run's own medians (both engines print them)."""
    prefill, decode = dig(run, "bench", "prefill_tokens_per_s"), dig(run, "bench", "decode_tokens_per_s")
    if not prefill or not decode:
        return None
    return 1000.0 * (run["prompt_tokens"] / prefill + 1.0 / decode)


def fmt(v, digits=2):
    return "-" if v is None else f"{v:.{digits}f}"


def fmt_bytes(b):
    if b is None:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size:
            return f"{b / size:.2f} {unit}"
    return f"{int(b)} B"


def cap_label(cap, cap_bytes):
    return cap if cap_bytes is None else f"{cap} ({fmt_bytes(cap_bytes)})"


def failure_text(run):
    m = run.get("measure") or {}
    cg = m.get("cgroup") or {}
    parts = [run.get("error") or f"exit {run['rc']}"]
    if m.get("timed_out"):
        parts.append("timed out")
    if cg.get("oom_kills"):
        parts.append(f"cgroup OOM kills {cg['oom_kills']}")
    if cg.get("max_usage_bytes") is not None:
        parts.append(f"cgroup peak {fmt_bytes(cg['max_usage_bytes'])}")
    return "; ".join(parts)


def cgroup_text(row):
    """The cgroup's high-water mark, with its share of the cap when there is one."""
    peak, cap = row["cgroup_peak_bytes"], row["cap_bytes"]
    if peak is None:
        return "-"
    return fmt_bytes(peak) if not cap else f"{fmt_bytes(peak)} ({100 * peak / cap:.0f} %)"


def failures(runs):
    """Each distinct error of the failed runs once, with how many runs it ended and one run's details."""
    by_error = {}
    for r in runs:
        if r["rc"] != 0:
            by_error.setdefault(r.get("error") or f"exit {r['rc']}", []).append(r)
    return [f"{len(rs)} of {len(runs)} runs: {failure_text(rs[0])}" for rs in by_error.values()]


def per_token(run, counter):
    """A decode counter of the neuron cache (stats.decode) per decoded token."""
    value, tokens = dig(run, "stats", "decode", counter), dig(run, "stats", "decode_tokens")
    return value / tokens if value is not None and tokens else None


def summarize(runs, settings):
    """One entry per (engine, variant, cap) of the regular runs (the repack checks apart)."""
    prompts = settings["prompts"]
    decode_prompt = prompts[0]
    keys = []
    for r in runs:
        k = (r["engine"], r["variant"], r["cap"])
        if not r.get("check") and k not in keys:
            keys.append(k)
    rows = []
    for engine, variant, cap in keys:
        mine = [r for r in runs if (r["engine"], r["variant"], r["cap"]) == (engine, variant, cap) and not r.get("check")]
        ok = [r for r in mine if r["rc"] == 0 and r.get("bench")]
        dec = [r for r in ok if r["prompt_tokens"] == decode_prompt]
        row = {
            "engine": engine, "variant": variant, "cap": cap, "cap_bytes": mine[0].get("cap_bytes"),
            "runs": len(mine), "runs_ok": len(ok),
            "decode_tokens_per_s": median([dig(r, "bench", "decode_tokens_per_s") for r in dec]),
            "decode_runs": sorted(dig(r, "bench", "decode_tokens_per_s") for r in dec),
            "ttft_ms": {str(p): median([ttft_ms(r) for r in ok if r["prompt_tokens"] == p]) for p in prompts},
            "prefill_tokens_per_s": {str(p): median([dig(r, "bench", "prefill_tokens_per_s") for r in ok
                                                     if r["prompt_tokens"] == p]) for p in prompts},
            "peak_rss_bytes": maximum([dig(r, "measure", "maxrss_bytes") for r in ok]),
            "cgroup_peak_bytes": maximum([dig(r, "measure", "cgroup", "max_usage_bytes") for r in ok]),
            "cgroup_limit_bytes": maximum([dig(r, "measure", "cgroup", "limit_bytes") for r in mine]),
            "cgroup_failcnt": maximum([dig(r, "measure", "cgroup", "failcnt") for r in ok]),
            "read_bytes": median([dig(r, "measure", "io", "read_bytes") for r in dec]),
            "major_faults": median([dig(r, "measure", "major_faults") for r in dec]),
            "wall_s": median([dig(r, "measure", "wall_s") for r in dec]),
            "steal_pct": median([dig(r, "measure", "steal_pct") for r in ok]),
            "iowait_pct": median([dig(r, "measure", "iowait_pct") for r in ok]),
            "budget_bytes": median([r.get("budget_bytes") for r in mine]),
            "cache_hit_rate": median([dig(r, "stats", "cache_hit_rate") for r in dec]),
            "bytes_read_per_token": median([dig(r, "stats", "bytes_read_per_token") for r in dec]),
            "reads_per_token": median([per_token(r, "reads") for r in dec]),
            "io_wait_ms_per_token": median([dig(r, "stats", "io_wait_ms_per_token") for r in dec]),
            "read_mib_per_s": median([dig(r, "stats", "io_read_mib_per_s") for r in dec]),
            "read_block_bytes_mean": median([dig(r, "stats", "read_block_bytes_mean") for r in dec]),
            "ms_per_token": {part: median([dig(r, "bench", "sparse", f"{part}_ms_per_token") for r in dec])
                             for part in ("attention", "predictor", "ffn")},
            "failures": failures(mine),
        }
        rows.append(row)
    # llama.cpp's best configuration per cap is the baseline of every ratio at that cap.
    best = {}
    for row in rows:
        if row["engine"] == "llama.cpp" and row["decode_tokens_per_s"] is not None:
            if row["cap"] not in best or row["decode_tokens_per_s"] > best[row["cap"]]["decode_tokens_per_s"]:
                best[row["cap"]] = row
    for row in rows:
        base = best.get(row["cap"])
        row["llamacpp_best"] = row is base
        row["vs_llamacpp"] = (row["decode_tokens_per_s"] / base["decode_tokens_per_s"]
                              if base and row["decode_tokens_per_s"] is not None else None)
    return rows, best


def cap_order(settings):
    caps = settings["caps"]
    limited = sorted((c for c in caps if c["bytes"] is not None), key=lambda c: c["bytes"])
    return [c["cap"] for c in limited] + [c["cap"] for c in caps if c["bytes"] is None]


def goals(rows, best, settings):
    out = []
    caps = {c["cap"] for c in settings["caps"]}
    for text, engine, cap, need_ratio, need_tps in GOALS:
        if cap not in caps:
            continue
        cands = [r for r in rows if r["engine"] == engine and r["cap"] == cap and r["decode_tokens_per_s"] is not None]
        base = best.get(cap)
        if not cands or (need_ratio is not None and base is None):
            out.append({"goal": text, "status": "not measured", "ratio": None})
            continue
        row = max(cands, key=lambda r: r["decode_tokens_per_s"])
        tps = row["decode_tokens_per_s"]
        ratio = tps / base["decode_tokens_per_s"] if base else None
        met = (need_ratio is None or ratio >= need_ratio) and (need_tps is None or tps >= need_tps)
        what = f"{fmt(tps)} tok/s"
        if base:
            what += f" vs {fmt(base['decode_tokens_per_s'])} tok/s ({base['variant']})"
        out.append({"goal": text, "status": "met" if met else "missed", "ratio": ratio, "text": what})
    return out


def table(rows, best, settings, machine, fio, check_runs, goal_list):
    prompts = settings["prompts"]
    order = cap_order(settings)
    rows = sorted(rows, key=lambda r: (order.index(r["cap"]) if r["cap"] in order else 99,
                                       ENGINE_ORDER.index(r["engine"]), r["variant"]))
    lines = []
    ttft_head = " | ".join(f"TTFT {p} ms" for p in prompts)
    lines.append(f"| cap | engine | configuration | decode tok/s median (runs) | vs llama.cpp | {ttft_head} "
                 "| peak RSS | cgroup peak (of cap) | read from disk | major faults | steal % |")
    lines.append("|" + "---|" * (10 + len(prompts)))
    for r in rows:
        config = VARIANT_TEXT.get((r["engine"], r["variant"]), r["variant"])
        if r["engine"] == "ember-sparse" and r["budget_bytes"] is not None:
            config += f" {fmt_bytes(r['budget_bytes'])}"
        if r["llamacpp_best"] and sum(1 for x in rows if x["engine"] == "llama.cpp" and x["cap"] == r["cap"]) > 1:
            config += " (best)"
        runs_text = " ".join(fmt(v) for v in r["decode_runs"])
        if r["runs_ok"] < r["runs"]:
            runs_text = (runs_text + "; " if runs_text else "") + f"{r['runs'] - r['runs_ok']} of {r['runs']} failed"
        decode = f"{fmt(r['decode_tokens_per_s'])} ({runs_text})" if r["decode_tokens_per_s"] is not None else f"- ({runs_text})"
        ttfts = " | ".join(fmt(r["ttft_ms"][str(p)], 0) for p in prompts)
        lines.append(f"| {cap_label(r['cap'], r['cap_bytes'])} | {ENGINE_NAMES[r['engine']]} | {config} | {decode} "
                     f"| {fmt(r['vs_llamacpp']) + 'x' if r['vs_llamacpp'] is not None else '-'} | {ttfts} "
                     f"| {fmt_bytes(r['peak_rss_bytes'])} | {cgroup_text(r)} | {fmt_bytes(r['read_bytes'])} "
                     f"| {'-' if r['major_faults'] is None else int(r['major_faults'])} | {fmt(r['steal_pct'], 1)} |")
    lines.append("")
    lines.append(f"Model: `{os.path.basename(settings['dense_model'])}` ({fmt_bytes(settings['dense_model_bytes'])}) for "
                 f"llama.cpp and Ember dense; `{os.path.basename(settings['pack'] or '-')}` "
                 f"({fmt_bytes(settings.get('pack_bytes'))}) for Ember sparse. A cap is a percentage of the llama.cpp "
                 "file or a size, the same byte limit for every engine (cgroup v1 memory.limit_in_bytes and memsw on the whole "
                 "process: anonymous memory, page cache, kernel memory charged to it).")
    lines.append(f"{settings['threads']} threads, medians of {settings['runs']} fresh processes per configuration "
                 "(page cache dropped before each, configurations alternating; each process warms up once "
                 f"in-process). Decode: {settings['gen_tokens']} tokens after a {prompts[0]}-token prompt. "
                 "TTFT = prompt prefill + one decode step. Peak RSS: ru_maxrss (largest over the runs); cgroup peak: "
                 "memory.max_usage_in_bytes (page cache included; at 100 % the cap was reached and the kernel reclaimed "
                 "or killed); read from disk: "
                 f"/proc/PID/io read_bytes of the whole {prompts[0]}-token process (load, warm-up, timed run); "
                 "steal: CPU steal time over the run, % of all CPU time.")
    probe = settings.get("probe") or {}
    if settings.get("pack"):
        lines.append(f"Ember sparse budget = cap - KV cache ({fmt_bytes(probe.get('kv_cache_bytes'))}) - scratch "
                     f"({fmt_bytes(probe.get('scratch_bytes'))}) - {settings['overhead_mib']} MiB fixed overhead "
                     "(code, libraries, I/O buffers, allocator, kernel memory); `--io-backend auto`.")
    sparse = [r for r in rows if r["engine"] == "ember-sparse" and r["cache_hit_rate"] is not None]
    if sparse:
        lines.append("")
        lines.append("| Ember sparse cap | budget | hit rate | bytes read per token | reads per token (mean size) "
                     "| I/O wait per token | MiB/s while reading | attention / predictor / FFN ms per token |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for r in sparse:
            ms = r["ms_per_token"]
            what = r["cap"] + {"budget-no-prefetch": ", --no-prefetch", "budget-prefetch": ", --prefetch"}.get(r["variant"], "")
            lines.append(f"| {what} | {fmt_bytes(r['budget_bytes'])} | {100 * r['cache_hit_rate']:.1f} % "
                         f"| {fmt_bytes(r['bytes_read_per_token'])} | {fmt(r['reads_per_token'], 0)} "
                         f"({fmt_bytes(r['read_block_bytes_mean'])}) | {fmt(r['io_wait_ms_per_token'], 1)} ms "
                         f"| {fmt(r['read_mib_per_s'], 0)} | {fmt(ms['attention'], 1)} / {fmt(ms['predictor'], 1)} / "
                         f"{fmt(ms['ffn'], 1)} |")
        lines.append("")
        lines.append("Medians over the decode runs (the neuron cache's counters of the timed decode). The FFN time "
                     "includes the I/O wait; MiB/s while reading is bytes read over the time reads were outstanding "
                     "(a lower bound on what the disk delivered): compare it with fio below at the nearest block size.")
    if check_runs:
        lines.append("")
        lines.append("Default configuration (repacking) under a cap, one process each:")
        lines.append("")
        for r in check_runs:
            what = f"{ENGINE_NAMES[r['engine']]} {VARIANT_TEXT.get((r['engine'], r['variant']), r['variant'])} at {r['cap']}"
            if r["rc"] == 0:
                m = r.get("measure") or {}
                lines.append(f"- {what}: ran, decode {fmt(dig(r, 'bench', 'decode_tokens_per_s'))} tok/s, cgroup peak "
                             f"{fmt_bytes(dig(m, 'cgroup', 'max_usage_bytes'))}, read {fmt_bytes(dig(m, 'io', 'read_bytes'))}")
            else:
                lines.append(f"- {what}: {failure_text(r)}")
    lines.append("")
    lines.append("Goals (memory-cap benchmark):")
    lines.append("")
    for g in goal_list:
        ratio = f" {g['ratio']:.2f}x ({g['text']})" if g["ratio"] is not None else ""
        lines.append(f"- {g['goal']}:{ratio} {g['status']}")
    for r in rows:
        for f in r["failures"]:
            lines.append(f"- {ENGINE_NAMES[r['engine']]} {r['variant']} at {r['cap']} failed: {f}")
    lines.append("")
    disk = machine.get("lsblk", "-")
    lines.append(f"Machine: {machine.get('cpu_model', '?')}, {machine.get('cpus', '?')} CPUs, "
                 f"{fmt_bytes(int(machine['mem_total_kib']) * 1024) if machine.get('mem_total_kib') else '?'} RAM, "
                 f"kernel {machine.get('kernel', '?')}; disk {disk} ({machine.get('file_system', '?')}, scheduler "
                 f"{machine.get('device_scheduler', '?')}); load {machine.get('loadavg_at_start', '?')} at start, "
                 f"{machine.get('loadavg_at_end', '?')} at end.")
    if fio:
        parts = [f"{f['phase']} {f['bs'] // 1024}K: {f['mib_per_s']:.0f} MiB/s ({f['iops']:.0f} IOPS)" for f in fio]
        lines.append("fio random O_DIRECT reads of the model file, io_uring, queue depth 32: " + ", ".join(parts) + ".")
    return "\n".join(lines) + "\n"


def plot(out_dir, rows, best, settings):
    if shutil.which("gnuplot") is None:
        print("memcap_report.py: gnuplot not found: no plots", file=sys.stderr)
        return
    order = cap_order(settings)
    prompts = settings["prompts"]

    def series(engine, cap):
        if engine == "llama.cpp":
            return best.get(cap)
        cands = [r for r in rows if r["engine"] == engine and r["cap"] == cap and r["decode_tokens_per_s"] is not None]
        return max(cands, key=lambda r: r["decode_tokens_per_s"]) if cands else None

    def num(v):
        return "NaN" if v is None else f"{v:.6g}"

    data = ["# x cap " + " ".join(f"tps_{e}" for e in ENGINE_ORDER) + " " +
            " ".join(f"ttft{p}_{e}" for p in prompts for e in ENGINE_ORDER)]
    for i, cap in enumerate(order):
        cols = [str(i), '"' + cap + '"']
        cols += [num((series(e, cap) or {}).get("decode_tokens_per_s")) for e in ENGINE_ORDER]
        cols += [num(((series(e, cap) or {}).get("ttft_ms") or {}).get(str(p))) for p in prompts for e in ENGINE_ORDER]
        data.append(" ".join(cols))
    with open(os.path.join(out_dir, "plot.dat"), "w") as f:
        f.write("\n".join(data) + "\n")
    styles = {"llama.cpp": "lc rgb '#d62728' pt 7", "ember-dense": "lc rgb '#7f7f7f' pt 5",
              "ember-sparse": "lc rgb '#1f77b4' pt 9"}
    titles = {"llama.cpp": "llama.cpp (best configuration)", "ember-dense": "Ember dense", "ember-sparse": "Ember sparse"}
    # A file given with --model names itself; a synthesised one its preset.
    name = (os.path.basename(settings["dense_model"]) if settings.get("model_given")
            else f"{settings['preset']} {settings['type']}")
    model = f"{name}, {fmt_bytes(settings['dense_model_bytes'])}"
    gp = [
        "set datafile missing 'NaN'",
        "set logscale y",
        "set grid ytics mytics xtics",
        "set key below horizontal",
        f"set xrange [-0.5:{len(order) - 0.5}]",
        "set xlabel 'memory cap (% of the llama.cpp model file, or a size; whole process incl. page cache)'",
        "set terminal pngcairo noenhanced size 900,600 font ',11'",
        "set output 'tokens_per_s.png'",
        f"set title 'Decode tokens/s under a memory cap ({model}, {settings['threads']} threads)'",
        "set ylabel 'decode tokens/s (log scale)'",
        "plot " + ", ".join(f"'plot.dat' using 1:{3 + j}:xtic(2) with linespoints lw 2 {styles[e]} title '{titles[e]}'"
                            for j, e in enumerate(ENGINE_ORDER)),
        f"set terminal pngcairo noenhanced size {560 * len(prompts)},600 font ',11'",
        "set xlabel 'memory cap (% of the llama.cpp model file, or a size)'",
        "set output 'ttft.png'",
        f"set multiplot layout 1,{len(prompts)} title 'Time to first token under a memory cap ({model})'",
        "set ylabel 'TTFT ms (log scale)'",
    ]
    for k, p in enumerate(prompts):
        gp.append(f"set title '{p}-token prompt'")
        gp.append("plot " + ", ".join(
            f"'plot.dat' using 1:{3 + len(ENGINE_ORDER) * (1 + k) + j}:xtic(2) with linespoints lw 2 {styles[e]} "
            f"title '{titles[e]}'" for j, e in enumerate(ENGINE_ORDER)))
    gp.append("unset multiplot")
    with open(os.path.join(out_dir, "plot.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    result = subprocess.run(["gnuplot", "plot.gp"], cwd=out_dir, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"memcap_report.py: gnuplot failed: {result.stderr.strip()}", file=sys.stderr)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    runs = load_jsonl(os.path.join(out_dir, "runs.jsonl"))
    if not runs:
        print(f"memcap_report.py: no runs in {out_dir}/runs.jsonl", file=sys.stderr)
        return 1
    with open(os.path.join(out_dir, "settings.json")) as f:
        settings = json.load(f)
    machine = load_kv(os.path.join(out_dir, "machine.txt"))
    fio = load_jsonl(os.path.join(out_dir, "fio.jsonl"))
    rows, best = summarize(runs, settings)
    goal_list = goals(rows, best, settings)
    check_runs = [r for r in runs if r.get("check")]
    text = table(rows, best, settings, machine, fio, check_runs, goal_list)
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"machine": machine, "settings": settings, "fio": fio, "configurations": rows,
                   "goals": goal_list, "runs": runs}, f, indent=1)
    plot(out_dir, rows, best, settings)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
