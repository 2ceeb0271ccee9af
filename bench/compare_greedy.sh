#!/usr/bin/env bash
# Greedy-output agreement between Ember and llama.cpp on the same synthetic 1b models
# (Q8_0, Q4_0, Q4_K by default): 5 fixed English prompts, 32 generated tokens each.
# Reports per model and prompt how many leading tokens agree, plus min and median, and
# exits 1 if any prompt agrees on fewer than 16 tokens (unless llama.cpp itself stopped at
# an end-of-generation token before that and Ember matched all of its output).
#
# usage: bench/compare_greedy.sh [--types Q8_0,Q4_0,Q4_K] [--preset 1b] [--tokens 32]
#                                [--min-agree 16] [--threads 2] [--ember PATH] [--out DIR]
#
# Environment: EMBER_CACHE (default ~/.cache/ember) holds models/ and llamacpp/;
# EMBER_MODELS_DIR moves models/.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly repo
readonly cache_root="${EMBER_CACHE:-$HOME/.cache/ember}"
readonly models_dir="${EMBER_MODELS_DIR:-$cache_root/models}"
types="Q8_0,Q4_0,Q4_K"
preset=1b
tokens=32
min_agree=16
threads=2
ember="$repo/build/ember"
out_dir=""

readonly prompts=(
    "Once upon a time"
    "The capital of France is"
    "In a quiet village by the sea, an old fisherman"
    "Write a short poem about the moon:"
    "Water boils at a temperature of"
)

usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
fail() { echo "compare_greedy.sh: error: $*" >&2; exit 2; }
log() { echo "compare_greedy.sh: $*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --types) types="$2"; shift 2 ;;
        --preset) preset="$2"; shift 2 ;;
        --tokens) tokens="$2"; shift 2 ;;
        --min-agree) min_agree="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --ember) ember="$2"; shift 2 ;;
        --out) out_dir="$2"; shift 2 ;;
        -h|--help) usage ;;
        *) echo "compare_greedy.sh: unknown option '$1'" >&2; usage ;;
    esac
done
command -v python3 >/dev/null || fail "python3 is needed to compare token lists"
[[ -x "$ember" ]] || fail "Ember binary not found at $ember (build it or pass --ember PATH)"

# shellcheck source=bench/llamacpp/synth_model.sh
source "$repo/bench/llamacpp/synth_model.sh"

peer="$("$repo/bench/llamacpp/setup.sh")" || fail "bench/llamacpp/setup.sh failed"

out_dir="${out_dir:-$repo/bench/results/greedy-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$out_dir"
pairs="$out_dir/pairs.jsonl"
: > "$pairs"

IFS=',' read -r -a type_list <<< "$types"
for type in "${type_list[@]}"; do
    file="$(synth_model "$ember" "$models_dir" "$preset" "$type")" || exit 2
    for index in "${!prompts[@]}"; do
        prompt="${prompts[$index]}"
        peer_line="$("$peer" greedy -m "$file" -t "$threads" -n "$tokens" -p "$prompt")" ||
            fail "peer_bench greedy failed on $file, prompt $index"
        # `ember run --print-token-ids` prints the generated ids as one JSON array line.
        ember_line="$("$ember" run -m "$file" -p "$prompt" -n "$tokens" --temp 0 --threads "$threads" \
                      --print-token-ids | grep '^\[' | tail -n1)" ||
            fail "ember run failed (or printed no token-id array) on $file, prompt $index"
        python3 -c '
import json, sys
peer = json.loads(sys.argv[1])
print(json.dumps({"type": sys.argv[3], "prompt_index": int(sys.argv[4]), "prompt": sys.argv[5],
                  "prompt_tokens": peer["prompt_tokens"], "llamacpp": peer["greedy_tokens"],
                  "llamacpp_ended_at_eog": peer.get("ended_at_eog", False),
                  "llamacpp_top2_margins": peer.get("top2_margins", []),
                  "ember": json.loads(sys.argv[2])}))' \
            "$peer_line" "$ember_line" "$type" "$index" "$prompt" >> "$pairs"
    done
done

python3 "$repo/bench/llamacpp/summarize_greedy.py" "$pairs" "$min_agree" \
    "$out_dir/results.json" "$out_dir/table.md" && status=0 || status=$?
cat "$out_dir/table.md"
log "results in $out_dir"
exit "$status"
