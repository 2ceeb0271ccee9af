#!/usr/bin/env bash
# The prefetch experiment as an A/B benchmark: Ember's sparse decode under a memory budget
# with prefetching (--prefetch: each layer's predicted bundles are read, from the residual
# entering the layer, while its attention runs) and without (--no-prefetch). This VM's disk
# drifts several-fold over minutes, so the two variants run back to back as a pair, for every
# budget and backend, in rounds; the table gives the median of each variant and the median of the per-pair ratio (on / off), which
# is what decides. Not a test: it writes bench/results/prefetch-<UTC date>/ and prints Markdown.
#
# usage: bench/prefetch_ab.sh [--model PACK] [--budgets "50% 25%"] [--backends "uring pread"]
#                             [--runs 3] [--threads 2] [--prompt-tokens 16] [--gen-tokens 32]
#                             [--ember PATH] [--out DIR] [--wait-idle SECONDS] [--report DIR]
#                             [--prompt-file TEXT]
# --report DIR prints the table of an earlier run's DIR again without running anything.
# --prompt-file: the prompt is the text's first --prompt-tokens tokens (a mixture of experts routes
# by the text, so its prefetch must be measured on one; the pack's profile must come from another).
# Without --model it uses (and makes on first use, as bench/sparse_bench.sh does) the synthetic
# mistral-7b drelu Q4_0 pack with Q4_0 predictors of rank 256. Needs root to drop the page cache
# before each process (warned and skipped otherwise) and jq.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly models_dir="${EMBER_MODELS_DIR:-${EMBER_CACHE:-$HOME/.cache/ember}/models}"
pack=""
budgets="50% 25%"
backends="uring pread"
runs=3
threads=2
prompt_tokens=16
gen_tokens=32
ember="$repo/build/ember"
out_dir=""
wait_idle=0
report_dir=""
prompt_file=""

log() { echo "prefetch_ab: $*" >&2; }
die() { log "$*"; exit 1; }
# shellcheck source=bench/bench_common.sh
source "$repo/bench/bench_common.sh"

while (($#)); do
    case "$1" in
        --model) pack="$2"; shift 2 ;;
        --budgets) budgets="$2"; shift 2 ;;
        --backends) backends="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --prompt-tokens) prompt_tokens="$2"; shift 2 ;;
        --gen-tokens) gen_tokens="$2"; shift 2 ;;
        --ember) ember="$2"; shift 2 ;;
        --out) out_dir="$2"; shift 2 ;;
        --wait-idle) wait_idle="$2"; shift 2 ;;
        --report) report_dir="$2"; shift 2 ;;
        --prompt-file) prompt_file="$(realpath "$2")"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
if [[ -n "$report_dir" ]]; then
    out_dir="$report_dir"
    runs=$(jq -s 'map(.round) | max' "$out_dir/runs.jsonl")
    pack=$(sed -n 's/^file=//p' "$out_dir/machine.txt")
    prompt_file=$(sed -n 's/^prompt_file=//p' "$out_dir/machine.txt")
    prompt_tokens=$(sed -n 's/^prompt_tokens=//p' "$out_dir/machine.txt")
    gen_tokens=$(sed -n 's/^gen_tokens=//p' "$out_dir/machine.txt")
    # In the order they ran (percentages and sizes such as 4G alike).
    budgets=$(jq -rs '[.[].budget] | reduce .[] as $b ([]; if index($b) then . else . + [$b] end) | join(" ")' "$out_dir/runs.jsonl")
    backends=$(jq -rs '[.[].backend] | reduce .[] as $b ([]; if index($b) then . else . + [$b] end) | join(" ")' "$out_dir/runs.jsonl")
fi
[[ -n "$report_dir" ]] || [[ -x "$ember" ]] || die "$ember not found: build first (scripts/setup.sh)"
command -v jq >/dev/null || die "jq is needed"
if [[ -z "$pack" && -z "$report_dir" ]]; then
    ensure_drelu_pack mistral-7b Q4_0 256 Q4_0
    pack="$drelu_pack"
fi
out_dir="${out_dir:-$repo/bench/results/prefetch-$(date -u +%Y%m%d-%H%M%S)}"
if [[ -z "$report_dir" ]]; then
    mkdir -p "$out_dir/raw"
    { machine_facts; disk_facts "$pack"; echo "prompt_file=$prompt_file"
      echo "prompt_tokens=$prompt_tokens"; echo "gen_tokens=$gen_tokens"; } > "$out_dir/machine.txt"
fi

cpu_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; ++i) t += $i; print t, $9; exit }' /proc/stat; }

# run_one ROUND BUDGET BACKEND VARIANT(off|on): one fresh process, one line in runs.jsonl.
run_one() {
    local round=$1 budget=$2 backend=$3 variant=$4
    local base="$out_dir/raw/r$round-${budget%\%}pct-$backend-$variant"
    local args=(bench -m "$pack" -t "$threads" --sparse predictor --memory-budget "$budget" --io-backend "$backend"
                --prompt-tokens "$prompt_tokens" --gen-tokens "$gen_tokens" --runs 1 --json --stats-json "$base.stats.json")
    # Both explicit: the default is on for dense packs and off for mixtures of experts.
    if [[ $variant == off ]]; then args+=(--no-prefetch); else args+=(--prefetch); fi
    [[ -n $prompt_file ]] && args+=(--prompt-file "$prompt_file")
    wait_for_idle
    if [[ -w /proc/sys/vm/drop_caches ]]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
    local before after rc=0
    before=$(cpu_ticks)
    "$ember" "${args[@]}" > "$base.stdout" 2> "$base.stderr" || rc=$?
    after=$(cpu_ticks)
    local steal
    steal=$(awk -v a="$before" -v b="$after" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[1] - x[1];
        if (d > 0) printf "%.1f", 100 * (y[2] - x[2]) / d; else print "null" }')
    if ((rc != 0)) || [[ ! -s "$base.stats.json" ]]; then
        log "round $round: $budget $backend prefetch $variant FAILED (exit $rc): $(tail -n1 "$base.stderr")"
        return 0
    fi
    jq -c --argjson round "$round" --arg budget "$budget" --arg backend "$backend" --arg variant "$variant" \
        --argjson steal "$steal" \
        '{round: $round, budget: $budget, backend: $backend, variant: $variant, steal_pct: $steal,
          tok_s: .decode_tokens_per_s, hit_rate: .cache_hit_rate, mib_per_token: (.bytes_read_per_token / 1048576),
          io_wait_ms_per_token: .io_wait_ms_per_token, prefetched: .decode.prefetched_bundles,
          prefetched_used: .decode.prefetched_used, peak_rss_mib: (.peak_rss_bytes / 1048576)}' \
        "$base.stats.json" >> "$out_dir/runs.jsonl"
    log "round $round: $budget $backend prefetch $variant: $(tail -n1 "$out_dir/runs.jsonl")"
}

[[ -n "$report_dir" ]] || : > "$out_dir/runs.jsonl"
for ((round = 1; round <= runs && ${#report_dir} == 0; ++round)); do
    for budget in $budgets; do
        for backend in $backends; do
            # Alternate which variant goes first, so neither always meets the disk after a rest.
            if ((round % 2)); then order="off on"; else order="on off"; fi
            for variant in $order; do run_one "$round" "$budget" "$backend" "$variant"; done
        done
    done
done

# The table (the script is read as it runs: do not edit it during a run): medians per variant, the median of the paired ratios, prefetch accuracy.
col() { jq -r --arg b "$1" --arg k "$2" --arg v "$3" \
    'select(.budget == $b and .backend == $k and .variant == $v) | .'"$4"' // empty' "$out_dir/runs.jsonl" | median; }
{
    echo "| budget | backend | tok/s off | tok/s on | on/off (median of pairs) | hit rate off / on | MiB read/token off / on | I/O wait ms/token off / on | prefetched bundles used | steal % off / on |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for budget in $budgets; do
        for backend in $backends; do
            ratio=$(jq -rs --arg b "$budget" --arg k "$backend" '
                [.[] | select(.budget == $b and .backend == $k)] | group_by(.round)[]
                | (map(select(.variant == "on"))[0].tok_s) as $on | (map(select(.variant == "off"))[0].tok_s) as $off
                | if $on and $off and $off > 0 then $on / $off else empty end' "$out_dir/runs.jsonl" | median)
            used=$(jq -rs --arg b "$budget" --arg k "$backend" '
                [.[] | select(.budget == $b and .backend == $k and .variant == "on")]
                | (map(.prefetched_used) | add) as $u | (map(.prefetched) | add) as $p
                | if $p and $p > 0 then "\(100 * $u / $p | round) %" else "-" end' "$out_dir/runs.jsonl")
            printf '| %s | %s | %.2f | %.2f | %.2f | %.3f / %.3f | %.1f / %.1f | %.1f / %.1f | %s | %.1f / %.1f |\n' \
                "$budget" "$backend" "$(col "$budget" "$backend" off tok_s)" "$(col "$budget" "$backend" on tok_s)" \
                "$ratio" "$(col "$budget" "$backend" off hit_rate)" "$(col "$budget" "$backend" on hit_rate)" \
                "$(col "$budget" "$backend" off mib_per_token)" "$(col "$budget" "$backend" on mib_per_token)" \
                "$(col "$budget" "$backend" off io_wait_ms_per_token)" "$(col "$budget" "$backend" on io_wait_ms_per_token)" \
                "$used" "$(col "$budget" "$backend" off steal_pct)" "$(col "$budget" "$backend" on steal_pct)"
        done
    done
    echo
    prompt_desc="synthetic ids"
    [[ -n $prompt_file ]] && prompt_desc="the start of $(basename "$prompt_file")"
    echo "Pack: \`$(basename "$pack")\`, $threads threads, $prompt_tokens-token prompt ($prompt_desc), $gen_tokens decode tokens, medians of $runs pairs of fresh processes (page cache dropped before each)."
} | tee "$out_dir/table.md"
