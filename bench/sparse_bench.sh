#!/usr/bin/env bash
# Dense against sparse (PowerInfer predictor) decode speed of Ember on a TurboSparse-like
# synthetic drelu model, all weights in RAM, on the plain file and on its neuron-bundle pack, with
# the time split per token (attention, predictor, FFN). A benchmark, not a test: it prints a
# Markdown table and writes raw JSON lines and machine facts under bench/results/sparse-<UTC date>/.
#
# usage: bench/sparse_bench.sh [--preset mistral-7b] [--type Q4_0] [--rank 256] [--predictor-type Q8_0] [--runs 3]
#                              [--threads 2] [--prompt-tokens 16] [--gen-tokens 32] [--no-pack]
#                              [--ember PATH] [--out DIR] [--wait-idle SECONDS] [--report DIR]
# --report DIR prints the table of an earlier run's DIR/runs.jsonl again without running anything.
#
# Each configuration runs R times as a fresh process, configurations alternating; each process
# does an untimed warm-up and one timed run. The table shows medians over the R processes.
# Models (made on first use, ~3 min and 5.4 GB for mistral-7b) live in EMBER_MODELS_DIR
# (default ~/.cache/ember/models): the drelu model with predictors of rank --rank (type
# --predictor-type) and ffn_down_t,
# its activation profile (`ember profile` on text the model generated) and the pack.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly models_dir="${EMBER_MODELS_DIR:-${EMBER_CACHE:-$HOME/.cache/ember}/models}"
preset=mistral-7b
quant=Q4_0
rank=256
predictor_type=Q8_0
runs=3
threads=2
prompt_tokens=16
gen_tokens=32
with_pack=true
ember="$repo/build/ember"
out_dir=""
wait_idle=0
report_only=false

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { echo "sparse_bench.sh: error: $*" >&2; exit 1; }
log() { echo "sparse_bench.sh: $*" >&2; }
# shellcheck source=bench/bench_common.sh
source "$repo/bench/bench_common.sh"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --preset) preset="$2"; shift 2 ;;
        --type) quant="$2"; shift 2 ;;
        --rank) rank="$2"; shift 2 ;;
        --predictor-type) predictor_type="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --prompt-tokens) prompt_tokens="$2"; shift 2 ;;
        --gen-tokens) gen_tokens="$2"; shift 2 ;;
        --no-pack) with_pack=false; shift ;;
        --ember) ember="$2"; shift 2 ;;
        --out) out_dir="$2"; shift 2 ;;
        --wait-idle) wait_idle="$2"; shift 2 ;;
        --report) out_dir="$2"; report_only=true; shift 2 ;;
        -h|--help) usage ;;
        *) echo "sparse_bench.sh: unknown option '$1'" >&2; usage ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || fail "--runs must be a positive integer, got '$runs'"
command -v jq >/dev/null || fail "jq is needed (apt-get install jq)"
configs=("plain dense" "plain predictor")
$with_pack && configs+=("pack dense" "pack predictor")
if ! $report_only; then
[[ -x "$ember" ]] || fail "no ember binary at $ember (run scripts/setup.sh first)"

ensure_drelu_model "$preset" "$quant" "$rank" "$predictor_type"
$with_pack && ensure_drelu_pack "$preset" "$quant" "$rank" "$predictor_type"
model="$drelu_model"
pack="$drelu_pack"

out_dir="${out_dir:-$repo/bench/results/sparse-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$out_dir"
machine_facts > "$out_dir/machine.txt"
for ((r = 1; r <= runs; ++r)); do
    for c in "${configs[@]}"; do
        read -r file mode <<< "$c"
        path="$model"; [[ "$file" == pack ]] && path="$pack"
        wait_for_idle
        log "run $r/$runs: $file $mode"
        "$ember" bench -m "$path" -t "$threads" --sparse "$mode" --prompt-tokens "$prompt_tokens" \
            --gen-tokens "$gen_tokens" --runs 1 --json 2>/dev/null |
            jq -c --arg file "$file" --arg mode "$mode" '. + {file: $file, config: $mode}' >> "$out_dir/runs.jsonl"
    done
done
fi

dense_tps=$(jq -r 'select(.file == "plain" and .config == "dense") | .decode_tokens_per_s' "$out_dir/runs.jsonl" | median)
{
    echo "| file | FFN | decode tok/s median (all runs) | vs plain dense | active | attention ms | predictor ms | FFN ms |"
    echo "|---|---|---|---|---|---|---|---|"
    for c in "${configs[@]}"; do
        read -r file mode <<< "$c"
        sel="select(.file == \"$file\" and .config == \"$mode\")"
        tps=$(jq -r "$sel | .decode_tokens_per_s" "$out_dir/runs.jsonl" | median)
        part() { jq -r "$sel | .sparse.$1 // empty | select(. > 0)" "$out_dir/runs.jsonl" | median; }
        fmt() { [[ "$1" == - ]] && echo - || printf "%.${2}f" "$1"; }
        all=$(jq -r "$sel | .decode_tokens_per_s" "$out_dir/runs.jsonl" | sort -g | xargs printf "%.2f " | sed 's/ $//')
        printf "| %s | %s | %.2f (%s) | %.2fx | %s | %s | %s | %s |\n" "$file" "$mode" "$tps" "$all" \
            "$(echo "$tps / $dense_tps" | bc -l)" "$(fmt "$(part ffn_active_fraction)" 3)" \
            "$(fmt "$(part attention_ms_per_token)" 1)" "$(fmt "$(part predictor_ms_per_token)" 1)" \
            "$(fmt "$(part ffn_ms_per_token)" 1)"
    done
} | tee "$out_dir/table.md"
log "results in $out_dir"
