#!/usr/bin/env bash
# The daemon's HTTP path, measured: (i) decode time per generated token through `ember serve` +
# HTTP + SSE with one streaming client against the same generation in-process (`ember run`, and
# `ember bench` for reference), same model, prompt, token count and threads, alternating the two
# so slow drifts hit both; (ii) time to first token and tokens/s with 1, 4 and 16 concurrent
# streaming clients (bench/http_bench.cpp, `ember-http-bench`). A benchmark, not a test.
#
# usage: bench/http_bench.sh [--model FILE | --preset 1b] [--type Q4_0] [--threads 2]
#                            [--prompt TEXT] [--gen-tokens 64] [--runs 5] [--ctx-size 1024]
#                            [--clients 1,4,16] [--client-runs 3] [--parallel 16]
#                            [--build-dir DIR] [--no-build] [--out DIR] [--wait-idle SECONDS]
#
# Builds the `ember` and `ember-http-bench` targets in --build-dir (default build/, configured
# if needed); --no-build uses the binaries already there. Writes
# bench/results/http-<UTC date-time>/: summary.md, results.json, overhead.jsonl (every
# single-client run of both paths), ember_bench.json, clients.jsonl (every request of the
# concurrency rounds), machine.txt, serve.log.
#
# Environment: EMBER_CACHE (default ~/.cache/ember) holds the synthetic models in models/;
# EMBER_MODELS_DIR moves them.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly cache_root="${EMBER_CACHE:-$HOME/.cache/ember}"
readonly models_dir="${EMBER_MODELS_DIR:-$cache_root/models}"
model=""
preset=1b
quant=Q4_0
threads=2
prompt="Once upon a time, in a small village at the edge of a dark forest, there lived"
gen_tokens=64
runs=5
# One context size for every process: with --parallel each slot gets its own KV cache of this
# many tokens, and the model's full context times 16 slots would not fit a 7B model's machine.
ctx_size=1024
clients=1,4,16
client_runs=3
parallel=16
build_dir="$repo/build"
out_dir=""
wait_idle=0
build=true

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { echo "http_bench.sh: error: $*" >&2; exit 1; }
log() { echo "http_bench.sh: $*" >&2; }
# shellcheck source=bench/bench_common.sh
source "$repo/bench/bench_common.sh"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --model) model="$2"; shift 2 ;;
        --preset) preset="$2"; shift 2 ;;
        --type) quant="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --prompt) prompt="$2"; shift 2 ;;
        --gen-tokens) gen_tokens="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --ctx-size) ctx_size="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --client-runs) client_runs="$2"; shift 2 ;;
        --parallel) parallel="$2"; shift 2 ;;
        --build-dir) build_dir="$2"; shift 2 ;;
        --no-build) build=false; shift ;;
        --out) out_dir="$2"; shift 2 ;;
        --wait-idle) wait_idle="$2"; shift 2 ;;
        -h|--help) usage ;;
        *) echo "http_bench.sh: unknown option '$1'" >&2; usage ;;
    esac
done
for v in threads gen_tokens runs ctx_size client_runs parallel; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || fail "--${v//_/-} must be a positive integer, got '${!v}'"
done
[[ "$wait_idle" =~ ^[0-9]+$ ]] || fail "--wait-idle must be a number of seconds, got '$wait_idle'"
[[ "$clients" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || fail "--clients must be a list like 1,4,16, got '$clients'"
[[ -n "$prompt" ]] || fail "--prompt must not be empty"
command -v python3 >/dev/null || fail "python3 is needed for medians and the summary"

# Both binaries come from one build folder so they match the tree being measured; cmake only
# recompiles what changed.
if $build; then
    command -v cmake >/dev/null || fail "cmake is needed to build ember and ember-http-bench (or pass --no-build)"
    if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
        log "configuring $build_dir (Release)"
        cmake -S "$repo" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >&2 || fail "cmake configure failed"
    fi
    log "building ember and ember-http-bench in $build_dir"
    cmake --build "$build_dir" --target ember ember-http-bench -j"$(nproc)" >&2 ||
        fail "build failed (--no-build measures the binaries already in $build_dir)"
fi
ember="$build_dir/ember"
client="$build_dir/ember-http-bench"
[[ -x "$ember" && -x "$client" ]] || fail "no ember or ember-http-bench in $build_dir after building"

if [[ -z "$model" ]]; then
    # shellcheck source=bench/llamacpp/synth_model.sh
    source "$repo/bench/llamacpp/synth_model.sh"
    model="$(synth_model "$ember" "$models_dir" "$preset" "$quant")" || fail "no $quant model for preset $preset"
fi
[[ -f "$model" ]] || fail "model file '$model' not found"

stamp="$(date -u +%Y%m%d-%H%M%S)"
out_dir="${out_dir:-$repo/bench/results/http-$stamp}"
mkdir -p "$out_dir"
overhead_raw="$out_dir/overhead.jsonl"
clients_raw="$out_dir/clients.jsonl"
serve_log="$out_dir/serve.log"
: > "$overhead_raw"

# The daemon's flags differ between versions: use --parallel (interleaved slots) and a queue
# that holds every client only where this `ember serve` has them.
serve_help="$("$ember" serve --help 2>&1)" || fail "ember serve --help failed"
serve_flags=(-m "$model" -t "$threads" -c "$ctx_size" --host 127.0.0.1 --port 0)
max_clients="$(tr ',' '\n' <<< "$clients" | sort -n | tail -n1)"
if grep -q -- '--parallel' <<< "$serve_help"; then
    serve_flags+=(--parallel "$parallel")
else
    log "this ember serve has no --parallel: concurrent requests are served one after another"
    parallel=none
fi
grep -q -- '--queue' <<< "$serve_help" && serve_flags+=(--queue "$((max_clients * 2))")
# Every request sends the same prompt; with prefix reuse the daemon would skip its prefill and
# the time to first token would not be comparable with `ember run`'s.
grep -q -- '--no-prefix-reuse' <<< "$serve_help" && serve_flags+=(--no-prefix-reuse)

{
    machine_facts
    echo "ember_git=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo none)$(git -C "$repo" diff --quiet 2>/dev/null || echo '+dirty')"
    echo "model=$model"
    echo "model_bytes=$(stat -c %s "$model")"
    echo "threads=$threads"
    echo "ctx_size=$ctx_size"
    echo "serve_flags=${serve_flags[*]}"
} > "$out_dir/machine.txt"
log "machine: $(tr '\n' ' ' < "$out_dir/machine.txt")"

server_pid=""
client_pid=""
stop_server() {
    # The long client run is a background child, so a TERM reaches the trap at once (bash runs
    # traps only between foreground commands); end it first, then the daemon.
    if [[ -n "$client_pid" ]]; then
        kill -TERM "$client_pid" 2>/dev/null || true
        wait "$client_pid" 2>/dev/null || true
        client_pid=""
    fi
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    server_pid=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# Starts `ember serve` on a free port (--port 0) and waits until /health answers 200.
start_server() {
    "$ember" serve "${serve_flags[@]}" > "$serve_log" 2>&1 &
    server_pid=$!
    local i port=""
    for ((i = 0; i < 600; i++)); do
        kill -0 "$server_pid" 2>/dev/null || { cat "$serve_log" >&2; fail "ember serve exited during start-up"; }
        port="$(grep -o -E 'http://127\.0\.0\.1:[0-9]+' "$serve_log" 2>/dev/null | head -n1 | sed 's/.*://')" || true
        [[ -n "$port" && "$port" != 0 ]] && break
        sleep 0.1
    done
    [[ -n "$port" && "$port" != 0 ]] || fail "ember serve printed no listening port within 60 s (see $serve_log)"
    for ((i = 0; i < 600; i++)); do
        if python3 - "$port" <<'EOF' 2>/dev/null; then
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2) as r:
    sys.exit(0 if r.status == 200 else 1)
EOF
            server_port="$port"
            return 0
        fi
        sleep 0.1
    done
    fail "ember serve on port $port never answered /health with 200 (see $serve_log)"
}

# CPU time of each of the daemon's threads so far (ns, from /proc/PID/task/TID/schedstat), one
# JSON object per call: with the thread pool's threads removed (the T busiest), what is left is
# the daemon's HTTP side (I/O threads, main thread), whose cost per token does not depend on how
# busy the machine is.
thread_cpu_snapshot() {
    python3 - "$server_pid" <<'EOF'
import glob, json, os, sys
cpu = {}
for path in glob.glob(f"/proc/{sys.argv[1]}/task/*/schedstat"):
    try:
        cpu[os.path.basename(os.path.dirname(path))] = int(open(path).read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
print(json.dumps(cpu))
EOF
}

# One in-process generation: `ember run` prints "decode K tokens in X s" on stderr.
run_in_process() {
    local run="$1" err load_before
    wait_for_idle
    load_before="$(cut -d' ' -f1-4 /proc/loadavg)"
    err="$("$ember" run -m "$model" -t "$threads" -c "$ctx_size" -p "$prompt" -n "$gen_tokens" --temp 0 --seed 1234 2>&1 >/dev/null)" ||
        fail "ember run failed: $err"
    python3 - "$err" "$run" "$load_before" "$(cut -d' ' -f1-4 /proc/loadavg)" >> "$overhead_raw" <<'EOF'
import json, re, sys
err, run, before, after = sys.argv[1:5]
m = re.search(r"prefill (\d+) tokens in ([0-9.]+) s.*decode (\d+) tokens in ([0-9.]+) s.*finish: (\w+)", err)
if not m:
    sys.exit("cannot find the timing line in ember run's output:\n" + err)
p, ps, d, ds, finish = int(m[1]), float(m[2]), int(m[3]), float(m[4]), m[5]
print(json.dumps({"path": "ember run", "run": int(run), "prompt_tokens": p, "prefill_ms": ps * 1000,
                  "decode_steps": d, "decode_ms_per_token": ds * 1000 / d if d else None,
                  "finish": finish, "loadavg_before": before, "loadavg_after": after}))
EOF
}

# One streamed request through the daemon, measured by the client.
run_over_http() {
    local run="$1" tmp load_before
    wait_for_idle
    load_before="$(cut -d' ' -f1-4 /proc/loadavg)"
    tmp="$(mktemp)"
    "$client" --url "127.0.0.1:$server_port" --clients 1 --runs 1 --warmup 0 --prompt "$prompt" \
        --max-tokens "$gen_tokens" --json-out "$tmp" > /dev/null || { rm -f "$tmp"; fail "ember-http-bench failed"; }
    python3 - "$tmp" "$run" "$load_before" "$(cut -d' ' -f1-4 /proc/loadavg)" >> "$overhead_raw" <<'EOF'
import json, sys
path, run, before, after = sys.argv[1:5]
lines = [json.loads(l) for l in open(path)]
req = next(l for l in lines if "client" in l)
proc = next(l for l in lines if l.get("client_process"))
print(json.dumps({"path": "http", "run": int(run), "ttft_ms": req["ttft_ms"], "tokens": req["tokens"],
                  "decode_ms_per_token": req["decode_ms_per_token"], "finish": req["finish_reason"],
                  "client_cpu_ms": proc["cpu_ms"], "loadavg_before": before, "loadavg_after": after}))
EOF
    rm -f "$tmp"
}

start_server
log "ember serve up on port $server_port: $(head -n3 "$serve_log" | tr '\n' ' ')"

# (i) HTTP + SSE overhead per token. Untimed warm-ups of both paths first (page cache, clocks).
log "overhead: warm-up"
"$ember" run -m "$model" -t "$threads" -c "$ctx_size" -p "$prompt" -n 8 --temp 0 > /dev/null 2>&1 || fail "ember run warm-up failed"
"$client" --url "127.0.0.1:$server_port" --clients 1 --runs 1 --warmup 1 --prompt "$prompt" --max-tokens 8 > /dev/null ||
    fail "ember-http-bench warm-up failed"
thread_cpu_snapshot > "$out_dir/server_threads_before.json"
for ((run = 1; run <= runs; run++)); do
    run_in_process "$run"
    run_over_http "$run"
    log "overhead run $run/$runs: $(tail -n2 "$overhead_raw" | python3 -c 'import json,sys; print(", ".join("%s %.2f ms/token" % (j["path"], j["decode_ms_per_token"]) for j in map(json.loads, sys.stdin)))')"
done

thread_cpu_snapshot > "$out_dir/server_threads_after.json"

# `ember bench` for reference: synthetic prompt of the same length, gen-tokens single steps.
prompt_len="$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["prompt_tokens"])' "$overhead_raw")"
wait_for_idle
bench_line="$("$ember" bench -m "$model" -t "$threads" -c "$ctx_size" --prompt-tokens "$prompt_len" --gen-tokens "$gen_tokens" \
              --runs "$runs" --json 2>/dev/null | grep '^{' | tail -n1)" || fail "ember bench failed"
echo "$bench_line" > "$out_dir/ember_bench.json"

# (ii) concurrent streaming clients, against the same daemon.
log "clients $clients: $client_runs rounds each, $gen_tokens tokens per request"
wait_for_idle
"$client" --url "127.0.0.1:$server_port" --clients "$clients" --runs "$client_runs" --warmup 1 --prompt "$prompt" \
    --max-tokens "$gen_tokens" --timeout 1800 --json-out "$clients_raw" >&2 &
client_pid=$!
wait "$client_pid" || log "some client requests failed (see $clients_raw)"
client_pid=""

stop_server
echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$out_dir/machine.txt"

python3 - "$out_dir" "$parallel" "$gen_tokens" "$runs" "$client_runs" "$prompt" "$threads" <<'EOF'
import json, statistics, sys
out, parallel, gen_tokens, runs, client_runs, prompt, threads = sys.argv[1:8]
machine = dict(l.rstrip("\n").split("=", 1) for l in open(f"{out}/machine.txt") if "=" in l)
overhead = [json.loads(l) for l in open(f"{out}/overhead.jsonl")]
bench = json.loads(open(f"{out}/ember_bench.json").read())
rows = [json.loads(l) for l in open(f"{out}/clients.jsonl")]
summaries = [r for r in rows if r.get("summary")]

def ms(path):
    return [r["decode_ms_per_token"] for r in overhead if r["path"] == path and r["decode_ms_per_token"]]

run_ms, http_ms = ms("ember run"), ms("http")
run_med, http_med = statistics.median(run_ms), statistics.median(http_ms)
bench_ms = 1000.0 / bench["decode_tokens_per_s"]
overhead_pct = (http_med - run_med) / run_med * 100.0
# Paired differences (run k of each path ran back to back) are less sensitive to slow drifts.
paired = [(h - r) / r * 100.0 for r, h in zip(run_ms, http_ms)]
# CPU per streamed token outside the engine: the daemon's threads other than the T busiest (the
# thread pool), and the client process (its own getrusage).
before = json.load(open(f"{out}/server_threads_before.json"))
after = json.load(open(f"{out}/server_threads_after.json"))
deltas = sorted((after[t] - before.get(t, 0) for t in after), reverse=True)
http_tokens = sum(r["tokens"] for r in overhead if r["path"] == "http")
engine_us = sum(deltas[:int(threads)]) / 1e3 / http_tokens
server_http_us = sum(deltas[int(threads):]) / 1e3 / http_tokens
client_us = sum(r["client_cpu_ms"] for r in overhead if r["path"] == "http") * 1e3 / http_tokens
results = {"machine": machine, "gen_tokens": int(gen_tokens), "prompt": prompt,
           "prompt_tokens": overhead[0]["prompt_tokens"], "parallel": parallel,
           "ember_run_decode_ms_per_token_median": run_med, "http_decode_ms_per_token_median": http_med,
           "ember_bench_decode_ms_per_token": bench_ms, "http_overhead_percent": overhead_pct,
           "http_overhead_percent_paired_median": statistics.median(paired),
           "server_http_threads_cpu_us_per_token": server_http_us, "client_cpu_us_per_token": client_us,
           "engine_threads_cpu_us_per_token": engine_us,
           "overhead_runs": overhead, "ember_bench": bench, "clients": summaries}
json.dump(results, open(f"{out}/results.json", "w"), indent=1)

L = []
L.append(f"# HTTP + SSE benchmark ({machine['date_utc']})\n")
L.append(f"Machine: {machine['cpu_model']}, {machine['cpus']} CPUs, {int(machine['mem_total_kib']) // 1024} MiB RAM; "
         f"load average {machine['loadavg_at_start']} at start, {machine.get('loadavg_at_end', '?')} at end. "
         f"Ember {machine['ember_git']}.")
L.append(f"Model: `{machine['model']}` ({int(machine['model_bytes']) / 1e6:.0f} MB), {machine['threads']} threads, "
         f"context {machine['ctx_size']} tokens in every process. "
         f"Prompt: {overhead[0]['prompt_tokens']} tokens; {gen_tokens} generated tokens per request, temperature 0.")
L.append(f"Daemon: `ember serve {machine['serve_flags']}` (--parallel: {parallel}).\n")
L.append(f"## Overhead of HTTP + SSE per generated token (one streaming client)\n")
L.append(f"Decode ms/token: the {gen_tokens}-token generation's single-token steps (sampling included). "
         f"`ember run`: its own decode timer, {runs} fresh processes. HTTP: gap between the first and the last "
         f"streamed text event over (tokens - 1), measured by `ember-http-bench`, {runs} requests to one daemon, "
         f"alternating with the `ember run` processes. `ember bench`: synthetic prompt of the same length, median of {runs}.\n")
L.append("| path | decode ms/token (median) | tok/s | all runs (ms/token) |")
L.append("|---|---|---|---|")
L.append(f"| `ember run` (in-process) | {run_med:.2f} | {1000 / run_med:.2f} | {', '.join(f'{x:.2f}' for x in run_ms)} |")
L.append(f"| `ember bench` (in-process) | {bench_ms:.2f} | {1000 / bench_ms:.2f} | {', '.join(f'{1000 / x:.2f}' for x in bench['decode_runs'])} |")
L.append(f"| `ember serve` + HTTP + SSE | {http_med:.2f} | {1000 / http_med:.2f} | {', '.join(f'{x:.2f}' for x in http_ms)} |")
L.append("")
L.append(f"**HTTP + SSE overhead: {overhead_pct:+.2f} % per token** (medians; goal < 2 %); median of the "
         f"{len(paired)} back-to-back pairs: {statistics.median(paired):+.2f} %. HTTP time to first token (median): "
         f"{statistics.median([r['ttft_ms'] for r in overhead if r['path'] == 'http']):.1f} ms; `ember run` prefill (median): "
         f"{statistics.median([r['prefill_ms'] for r in overhead if r['path'] == 'ember run']):.1f} ms.\n")
L.append(f"CPU time per streamed token outside the engine (does not depend on how busy the machine is): "
         f"daemon's HTTP side (threads other than the {threads} of the thread pool) {server_http_us:.0f} us, "
         f"client {client_us:.0f} us (connect, request, SSE and JSON parsing; process start-up excluded); "
         f"together {(server_http_us + client_us) / 1e3 / bench_ms * 100.0:.2f} % of an in-process decode step "
         f"({bench_ms:.2f} ms, `ember bench`). The thread pool used {engine_us / 1e3:.2f} ms of CPU per token.\n")
L.append(f"## Concurrent streaming clients ({client_runs} rounds each, medians over rounds)\n")
L.append("TTFT: request sent to first streamed text (median and maximum over the round's clients). Client tok/s: "
         "one client's decode rate between its first and last text event. Aggregate tok/s: all generated tokens "
         "of the round over the round's wall time.\n")
L.append("| clients | TTFT median ms | TTFT max ms | tokens/request | client tok/s | aggregate tok/s | failed |")
L.append("|---|---|---|---|---|---|---|")
for s in summaries:
    L.append(f"| {s['clients']} | {s['ttft_ms_median']:.1f} | {s['ttft_ms_max_median']:.1f} | "
             f"{s['tokens_per_request_median']:.0f} | {s['client_tokens_per_s_median']:.2f} | "
             f"{s['aggregate_tokens_per_s_median']:.2f} | {s['failed_requests']} |")
L.append("")
open(f"{out}/summary.md", "w").write("\n".join(L))
EOF
cat "$out_dir/summary.md"
log "results in $out_dir"
