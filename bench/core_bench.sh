#!/usr/bin/env bash
# Prefill and decode speed of Ember against llama.cpp on the same synthetic Q4_0 files with
# the same thread count. A benchmark, not a test: it prints a Markdown table and writes
# raw runs, medians and machine facts under bench/results/core-<UTC date>/.
#
# usage: bench/core_bench.sh [--models 1b,mistral-7b] [--runs 3] [--threads 2]
#                            [--prompt-tokens 512] [--gen-tokens 64] [--type Q4_0]
#                            [--inner-runs 1] [--ember PATH] [--peer-only] [--no-repack] [--out DIR]
#                            [--wait-idle SECONDS]
#
# Each engine runs R times as a fresh process, the engines alternating; every process does
# its own untimed warm-up, then --inner-runs timed runs (median taken in-process). The table
# shows the median over the R processes.
#
# Environment: EMBER_CACHE (default ~/.cache/ember) holds the synthetic models in models/ and
# the llama.cpp peer in llamacpp/ (see bench/llamacpp/setup.sh); EMBER_MODELS_DIR moves models/.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly cache_root="${EMBER_CACHE:-$HOME/.cache/ember}"
readonly models_dir="${EMBER_MODELS_DIR:-$cache_root/models}"
models="1b,mistral-7b"
runs=3
inner_runs=1
threads=2
prompt_tokens=512
gen_tokens=64
quant=Q4_0
ember="$repo/build/ember"
peer_only=false
peer_flags=()
out_dir=""
wait_idle=0

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { echo "core_bench.sh: error: $*" >&2; exit 1; }
log() { echo "core_bench.sh: $*" >&2; }
# shellcheck source=bench/bench_common.sh
source "$repo/bench/bench_common.sh"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --models) models="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --inner-runs) inner_runs="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --prompt-tokens) prompt_tokens="$2"; shift 2 ;;
        --gen-tokens) gen_tokens="$2"; shift 2 ;;
        --type) quant="$2"; shift 2 ;;
        --ember) ember="$2"; shift 2 ;;
        --peer-only) peer_only=true; shift ;;
        --no-repack) peer_flags+=(--no-repack); shift ;;
        --out) out_dir="$2"; shift 2 ;;
        --wait-idle) wait_idle="$2"; shift 2 ;;
        -h|--help) usage ;;
        *) echo "core_bench.sh: unknown option '$1'" >&2; usage ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || fail "--runs must be a positive integer, got '$runs'"
[[ "$inner_runs" =~ ^[1-9][0-9]*$ ]] || fail "--inner-runs must be a positive integer, got '$inner_runs'"
[[ "$wait_idle" =~ ^[0-9]+$ ]] || fail "--wait-idle must be a number of seconds, got '$wait_idle'"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || fail "--threads must be a positive integer, got '$threads'"
command -v python3 >/dev/null || fail "python3 is needed to compute medians"
if ! $peer_only && [[ ! -x "$ember" ]]; then
    fail "Ember binary not found at $ember (build it, pass --ember PATH, or use --peer-only)"
fi

# shellcheck source=bench/llamacpp/synth_model.sh
source "$repo/bench/llamacpp/synth_model.sh"

peer="$("$repo/bench/llamacpp/setup.sh")" || fail "bench/llamacpp/setup.sh failed"

stamp="$(date -u +%Y%m%d-%H%M%S)"
out_dir="${out_dir:-$repo/bench/results/core-$stamp}"
mkdir -p "$out_dir"
raw="$out_dir/runs.jsonl"
: > "$raw"

# Machine facts go next to the numbers: they are meaningless without them.
{
    machine_facts
    echo "ember_git=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo none)"
    echo "llamacpp=node-llama-cpp@3.21.1 (llama.cpp v0.4.0) $peer"
} > "$out_dir/machine.txt"
log "machine: $(tr '\n' ' ' < "$out_dir/machine.txt")"

# Runs one engine once and appends its JSON line, tagged with the run's role, to $raw.
run_engine() {
    local engine="$1" model_name="$2" file="$3" role="$4" line load_before
    wait_for_idle
    load_before="$(cut -d' ' -f1-4 /proc/loadavg)"
    if [[ "$engine" == ember ]]; then
        line="$("$ember" bench -m "$file" --threads "$threads" --prompt-tokens "$prompt_tokens" \
                --gen-tokens "$gen_tokens" --runs "$inner_runs" --json | grep '^{' | tail -n1)" ||
            fail "ember bench failed on $file"
    else
        line="$("$peer" bench -m "$file" -t "$threads" -p "$prompt_tokens" -n "$gen_tokens" -r "$inner_runs" \
                ${peer_flags[@]+"${peer_flags[@]}"})" || fail "peer_bench failed on $file"
    fi
    [[ -n "$line" ]] || fail "$engine printed no JSON line for $file"
    log "$model_name $engine $role: $line"
    python3 -c '
import json, sys
run = json.loads(sys.argv[1])
run.update(preset=sys.argv[2], role=sys.argv[3], loadavg_before=sys.argv[4], loadavg_after=sys.argv[5])
print(json.dumps(run))' \
        "$line" "$model_name" "$role" "$load_before" "$(cut -d' ' -f1-4 /proc/loadavg)" >> "$raw"
}

engines=(llama.cpp)
$peer_only || engines=(ember llama.cpp)

IFS=',' read -r -a model_list <<< "$models"
for model_name in "${model_list[@]}"; do
    file="$(synth_model "$ember" "$models_dir" "$model_name" "$quant")" ||
        fail "no $quant model for preset $model_name"
    # Alternating the engines spreads slow drifts (other load, thermal) over both equally.
    for ((run = 1; run <= runs; run++)); do
        for engine in "${engines[@]}"; do
            run_engine "$engine" "$model_name" "$file" "run$run"
        done
    done
done

echo "loadavg_at_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$out_dir/machine.txt"

python3 "$repo/bench/llamacpp/summarize_core.py" "$raw" "$out_dir/machine.txt" \
    "$out_dir/results.json" "$out_dir/table.md"
cat "$out_dir/table.md"
log "results in $out_dir"
