"""Medians and the Markdown table for bench/core_bench.sh.

usage: summarize_core.py RUNS_JSONL MACHINE_TXT OUT_JSON OUT_MD
Warm-up runs are kept in RUNS_JSONL for the record but left out of the medians.
"""
import json
import statistics
import sys


def load_runs(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_machine(path):
    facts = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            facts[key] = value
    return facts


def summarize(runs):
    groups = {}
    for r in runs:
        if r.get("role") == "warmup":
            continue
        groups.setdefault((r["preset"], r["engine"]), []).append(r)
    rows = []
    for (preset, engine), rs in groups.items():
        rows.append({
            "preset": preset,
            "engine": engine,
            "model": rs[0]["model"],
            "threads": rs[0]["threads"],
            "runs": len(rs),
            "config": {k: rs[0][k] for k in ("repack", "mmap", "system_info", "kernels") if k in rs[0]},
            "prefill_tokens_per_s_median": statistics.median(r["prefill_tokens_per_s"] for r in rs),
            "decode_tokens_per_s_median": statistics.median(r["decode_tokens_per_s"] for r in rs),
            "prefill_tokens_per_s_all": [r["prefill_tokens_per_s"] for r in rs],
            "decode_tokens_per_s_all": [r["decode_tokens_per_s"] for r in rs],
        })
    return rows


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


def peer_config(rows):
    peer = [r for r in rows if r["engine"] == "llama.cpp"]
    if not peer:
        return "not run"
    c = peer[0]["config"]
    return (f"node-llama-cpp 3.21.1 prebuilt (release v0.4.0), repack {'on' if c.get('repack') else 'off'}, "
            f"{'mmap' if c.get('mmap') else 'no mmap'}, prompt in one batch, CPU features: {c.get('system_info', '?').strip()}")


def markdown(rows, machine):
    by_key = {(r["preset"], r["engine"]): r for r in rows}
    lines = [
        f"Machine: {machine.get('cpu_model', '?')}, {machine.get('cpus', '?')} CPUs, "
        f"{int(machine.get('mem_total_kib', '0') or 0) // 1024} MiB RAM; "
        f"load average {machine.get('loadavg_at_start', '?')} at start, "
        f"{machine.get('loadavg_at_end', '?')} at end.",
        "llama.cpp: " + peer_config(rows),
        "Ember kernels: " + ", ".join(sorted({r["config"].get("kernels", "?") for r in rows if r["engine"] == "ember"}) or ["not run"]),
        "",
        "| model | engine | threads | prefill tok/s (median) | decode tok/s (median) | ratio ember/llama.cpp (prefill, decode) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        peer = by_key.get((r["preset"], "llama.cpp"))
        if r["engine"] == "ember" and peer:
            rel = (f"{ratio(r['prefill_tokens_per_s_median'], peer['prefill_tokens_per_s_median'])}, "
                   f"{ratio(r['decode_tokens_per_s_median'], peer['decode_tokens_per_s_median'])}")
        else:
            rel = ""
        lines.append(
            f"| {r['preset']} | {r['engine']} | {r['threads']} | "
            f"{r['prefill_tokens_per_s_median']:.2f} | {r['decode_tokens_per_s_median']:.2f} | {rel} |")
    return "\n".join(lines) + "\n"


def main():
    runs_path, machine_path, out_json, out_md = sys.argv[1:5]
    runs = load_runs(runs_path)
    machine = load_machine(machine_path)
    rows = summarize(runs)
    with open(out_json, "w", encoding="utf-8") as f:
        json.dump({"machine": machine, "summary": rows, "runs": runs}, f, indent=2)
        f.write("\n")
    with open(out_md, "w", encoding="utf-8") as f:
        f.write(markdown(rows, machine))


if __name__ == "__main__":
    main()
