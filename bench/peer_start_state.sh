#!/usr/bin/env bash
# How much llama.cpp's speed under a memory cap depends on the state the run starts in, not on
# the harness: the same `peer_bench bench` process (mmap, no repack, 2 threads) in the same cgroup
# v1 memory cap, started in three states, alternating, medians per state:
#
#   cold     page cache dropped just before (what bench/memcap_bench.sh does);
#   warm     the model file read into the page cache by a process OUTSIDE the cgroup just before,
#            without dropping it: cgroup v1 charges a cached page to the cgroup that first read it,
#            so the capped process uses those pages without their counting against its cap;
#   drained  page cache dropped just after reading --drain-gib GiB from the file system with
#            O_DIRECT (this cloud disk serves bursts from a credit that heavy reads use up; what a
#            benchmark ran just before decides how much is left).
#
# usage: bench/peer_start_state.sh --model GGUF [--cap 50%|SIZE] [--runs 3] [--prompt-tokens 128]
#                                  [--gen-tokens 16] [--drain-gib 20] [--drain-file FILE]
#                                  [--rest-s 60] [--out DIR]
# Needs root (cgroups, drop_caches), gcc, jq, python3 and the llama.cpp peer (bench/llamacpp/setup.sh).
# Writes runs.jsonl (one line per process) and summary.md under DIR
# (default bench/results/peer-start-state-<UTC date-time>/).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly cache_root="${EMBER_CACHE:-$HOME/.cache/ember}"
readonly cgroup_mount=/sys/fs/cgroup/memory
model="" cap=50% runs=3 prompt_tokens=128 gen_tokens=16 drain_gib=20 drain_file="" rest_s=60 out_dir=""

fail() { echo "peer_start_state.sh: error: $*" >&2; exit 1; }
log() { echo "peer_start_state.sh: $*" >&2; }
wait_idle=0
# shellcheck source=bench/bench_common.sh
source "$repo/bench/bench_common.sh"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --model) model="$2"; shift 2 ;;
        --cap) cap="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --prompt-tokens) prompt_tokens="$2"; shift 2 ;;
        --gen-tokens) gen_tokens="$2"; shift 2 ;;
        --drain-gib) drain_gib="$2"; shift 2 ;;
        --drain-file) drain_file="$2"; shift 2 ;;
        --rest-s) rest_s="$2"; shift 2 ;;
        --out) out_dir="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
        *) fail "unknown option '$1' (--help lists them)" ;;
    esac
done
[[ -f "$model" ]] || fail "--model: no file at '$model'"
for n in "$runs" "$prompt_tokens" "$gen_tokens" "$drain_gib" "$rest_s"; do
    [[ "$n" =~ ^[0-9]+$ ]] || fail "'$n' is not a whole number"
done
[[ $EUID -eq 0 && -f "$cgroup_mount/memory.limit_in_bytes" ]] || fail "needs root and a cgroup v1 memory controller"
for tool in gcc jq python3; do command -v "$tool" >/dev/null || fail "'$tool' is needed"; done
# The drain reads a file other than the model (its cached pages would not matter: O_DIRECT), by
# default the model itself, over and over.
drain_file="${drain_file:-$model}"

model_bytes=$(stat -c %s "$model")
case "$cap" in
    *%) cap_bytes=$(( model_bytes * ${cap%\%} / 100 )) ;;
    *G) cap_bytes=$(( ${cap%G} * 1073741824 )) ;;
    *M) cap_bytes=$(( ${cap%M} * 1048576 )) ;;
    *) fail "--cap takes a percentage of the model file or a size (2G, 900M), got '$cap'" ;;
esac

ensure_run_measured  # sets $measure (bench_common.sh)
peer="$("$repo/bench/llamacpp/setup.sh")" || fail "bench/llamacpp/setup.sh failed"

out_dir="${out_dir:-$repo/bench/results/peer-start-state-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$out_dir/raw"
own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3; exit}' /proc/self/cgroup)
cg="$cgroup_mount${own%/}/ember-peer-start-$$"
mkdir "$cg"
trap 'while read -r p; do kill -KILL "$p" 2>/dev/null || true; done < "$cg/cgroup.procs"; rmdir "$cg" 2>/dev/null || true' EXIT
echo "$cap_bytes" > "$cg/memory.limit_in_bytes"
[[ -f "$cg/memory.memsw.limit_in_bytes" ]] && echo "$cap_bytes" > "$cg/memory.memsw.limit_in_bytes"

# Reads GiB gibibytes of FILE with O_DIRECT in 1 MiB blocks, from the start again as often as needed.
drain() {
    local left=$(( $1 * 1024 )) per=$(( $(stat -c %s "$2") / 1048576 ))
    while (( left > 0 )); do
        local n=$(( left < per ? left : per ))
        dd if="$2" of=/dev/null bs=1M count="$n" iflag=direct status=none
        left=$(( left - n ))
    done
}

run_state() {
    local round=$1 state=$2 base="$out_dir/raw/r$1-$2"
    sleep "$rest_s"  # every state starts after the same rest, so only its own preparation differs
    case "$state" in
        cold) drop_page_cache ;;
        warm) drop_page_cache; cat "$model" > /dev/null ;;
        drained) drain "$drain_gib" "$drain_file"; drop_page_cache ;;
    esac
    echo 0 > "$cg/memory.max_usage_in_bytes"
    local rc=0
    "$measure" -o "$base.measure.json" --cgroup "$cg" --timeout 1800 -- \
        "$peer" bench -m "$model" -t 2 -p "$prompt_tokens" -n "$gen_tokens" -r 1 --mmap --no-repack \
        > "$base.stdout" 2> "$base.stderr" || rc=$?
    local bench; bench=$(grep '^{' "$base.stdout" | tail -n1 || true)
    jq -cn --argjson round "$round" --arg state "$state" --argjson rc "$rc" --argjson cap "$cap_bytes" \
        --argjson bench "${bench:-null}" --argjson measure "$(cat "$base.measure.json" 2>/dev/null || echo null)" \
        '{round: $round, state: $state, rc: $rc, cap_bytes: $cap, bench: $bench, measure: $measure}' >> "$out_dir/runs.jsonl"
    log "round $round, $state: $(tail -n1 "$out_dir/runs.jsonl" | jq -r '"decode \(.bench.decode_tokens_per_s // "-") tok/s, read \((.measure.io.read_bytes // 0) / 1073741824 * 10 | round / 10) GiB, cgroup peak \((.measure.cgroup.max_usage_bytes // 0) / 1048576 | round) MiB"')"
}

log "model $model ($model_bytes B), cap $cap = $cap_bytes B, $runs rounds of cold / warm / drained"
states=(cold warm drained)
for ((r = 1; r <= runs; ++r)); do
    for ((i = 0; i < 3; ++i)); do run_state "$r" "${states[$(( (i + r - 1) % 3 ))]}"; done
done

python3 - "$out_dir" "$model" "$cap" "$cap_bytes" "$prompt_tokens" "$gen_tokens" "$drain_gib" "$rest_s" <<'EOF'
import json, statistics, sys
out, model, cap, cap_bytes, p, g, drain, rest = sys.argv[1:]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl") if l.strip()]
lines = [f"llama.cpp (`peer_bench bench -p {p} -n {g} -r 1 --mmap --no-repack`, 2 threads) on `{model}` under a "
         f"{cap} cap ({int(cap_bytes) / 2**30:.2f} GiB, cgroup v1), by start state; {rest} s rest before each; "
         f"drained = after reading {drain} GiB with O_DIRECT.", "",
         "| state | decode tok/s median (runs) | prefill tok/s median | read from disk median | cgroup peak |",
         "|---|---|---|---|---|"]
for state in ("cold", "warm", "drained"):
    ok = [r for r in runs if r["state"] == state and r["rc"] == 0 and r["bench"]]
    if not ok:
        lines.append(f"| {state} | failed | - | - | - |")
        continue
    dec = sorted(r["bench"]["decode_tokens_per_s"] for r in ok)
    pre = statistics.median(r["bench"]["prefill_tokens_per_s"] for r in ok)
    rd = statistics.median(r["measure"]["io"]["read_bytes"] for r in ok) / 2**30
    peak = max(r["measure"]["cgroup"]["max_usage_bytes"] for r in ok) / 2**30
    lines.append(f"| {state} | {statistics.median(dec):.2f} ({' '.join(f'{d:.2f}' for d in dec)}) | {pre:.2f} "
                 f"| {rd:.1f} GiB | {peak:.2f} GiB |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
