#!/usr/bin/env bash
# Sparse == dense on the 1b-shaped relu and drelu synthetic models, plain file and pack: greedy
# token ids of `ember run` in dense, oracle and predictor modes (32 tokens, 3 prompts), and the
# predictor's KL / top-1 against dense on generated text (`ember eval --compare-dense`). Slower
# than a unit test (models of ~0.8 GB), so a script; tests/sparse and tests/pack cover the tiny
# models. Prints one line per comparison and exits 1 if oracle or dense differ anywhere.
# With --budgets, the pack also runs under memory budgets (100%, 50% and the smallest the
# planner accepts, io_uring and pread), dense and predictor, and must give exactly the tokens of
# the same mode all in RAM.
#
# usage: bench/sparse_check.sh [--preset 1b] [--type Q4_0] [--ember PATH] [--budgets]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly models_dir="${EMBER_MODELS_DIR:-${EMBER_CACHE:-$HOME/.cache/ember}/models}"
preset=1b
quant=Q4_0
ember="$repo/build/ember"
budgets=false
while [[ $# -gt 0 ]]; do
    case "$1" in
        --budgets) budgets=true; shift ;;
        --preset) preset="$2"; shift 2 ;;
        --type) quant="$2"; shift 2 ;;
        --ember) ember="$2"; shift 2 ;;
        *) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
mkdir -p "$models_dir"
prompts=("Once upon a time" "The little boat" "In the morning the sun")
status=0
for act in relu drelu; do
    base="$models_dir/$preset-$act-$quant-check"
    [[ -f "$base.gguf" ]] || "$ember" synth --preset "$preset" --type "$quant" --activation "$act" --predictor \
        --down-transposed -q -o "$base.gguf" >&2
    if [[ ! -f "$base.pack.gguf" ]]; then
        "$ember" run -m "$base.gguf" -p "Once upon a time" -n 256 --temp 0.8 -s 1 > "$base.txt" 2>/dev/null
        "$ember" profile -m "$base.gguf" -f "$base.txt" -o "$base.profile" 2>/dev/null
        "$ember" pack -m "$base.gguf" --profile "$base.profile" -o "$base.pack.gguf" >&2 2>/dev/null
    fi
    for p in "${prompts[@]}"; do
        ref=$("$ember" run -m "$base.gguf" -p "$p" -n 32 --temp 0 --print-token-ids 2>/dev/null)
        for file in "$base.gguf" "$base.pack.gguf"; do
            for mode in dense oracle predictor; do
                got=$("$ember" run -m "$file" -p "$p" -n 32 --temp 0 --sparse "$mode" --print-token-ids 2>/dev/null)
                same=$([[ "$got" == "$ref" ]] && echo same || echo DIFFERENT)
                echo "$act $(basename "$file") $mode '$p': $same greedy tokens as plain dense"
                [[ "$same" == same || "$mode" == predictor ]] || status=1
            done
        done
    done
    if $budgets; then
        # The smallest budget: the number in the planner's error for a 1-byte budget.
        minimum=$( { "$ember" run -m "$base.pack.gguf" -p x -n 1 --memory-budget 1 2>&1 || true; } |
            sed -n 's/.*the minimum is \([0-9]*\) bytes.*/\1/p')
        [[ -n "$minimum" ]] || { echo "$act: could not read the minimum budget" >&2; exit 1; }
        for p in "${prompts[@]}"; do
            for mode in dense predictor; do
                ref=$("$ember" run -m "$base.pack.gguf" -p "$p" -n 32 --temp 0 --sparse "$mode" --print-token-ids 2>/dev/null)
                for budget in 100% 50% "$minimum"; do
                    for backend in uring pread; do
                        got=$("$ember" run -m "$base.pack.gguf" -p "$p" -n 32 --temp 0 --sparse "$mode" --print-token-ids \
                            --memory-budget "$budget" --io-backend "$backend" 2>/dev/null) || got="FAILED"
                        same=$([[ "$got" == "$ref" ]] && echo same || echo DIFFERENT)
                        echo "$act pack $mode budget $budget $backend '$p': $same greedy tokens as all in RAM"
                        [[ "$same" == same ]] || status=1
                    done
                done
            done
        done
    fi
    for file in "$base.gguf" "$base.pack.gguf"; do
        "$ember" eval -m "$file" -f "$base.txt" --sparse predictor --compare-dense --max-tokens 200 --json 2>/dev/null |
            jq -c --arg act "$act" --arg f "$(basename "$file")" \
                '{act: $act, file: $f, tokens, perplexity, kl_mean, top1_agreement, ffn_active_fraction}'
    done
done
exit $status
