#!/usr/bin/env bash
# Makes the two Mixtral-8x7B-shaped files of the mixture-of-experts memory-cap benchmark, in
# DIR (default $EMBER_MODELS_DIR/moe, else ~/.cache/ember/models/moe), then prints the benchmark's
# command. Each step is skipped when its output exists.
#
#   1. mixtral-8x7b-drelu-Q4_0.gguf (27.6 GB): the TurboSparse-like source, dReLU experts with
#      Q4_0 predictors (`ember synth --preset mixtral-8x7b --activation drelu --predictor`).
#   2. mixtral-8x7b-drelu-Q4_0.profile: `ember profile` on the first 512 tokens of an English text
#      (--profile-text, default docs/design.md), one batch: one pass over the 27.6 GB file.
#   3. mixtral-8x7b-drelu-Q4_0.pack.gguf (27.7 GB): `ember pack`; the source is then deleted.
#   4. mixtral-8x7b-silu-Q4_0.gguf (26.3 GB): the SwiGLU model of the same shape and router for
#      llama.cpp.
# At most 55.3 GB are on disk at once (source and pack, before the source goes); the benchmark then
# needs 54 GB (pack and SwiGLU file). On the 2-core VM: ~35 min for step 1 on idle cores, ~2 min for
# step 2, ~2 min for step 3, ~9 min for step 4.
#
# usage: bench/mixtral_files.sh [--dir DIR] [--profile-text FILE] [--ember PATH] [--threads N]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${EMBER_MODELS_DIR:-$HOME/.cache/ember/models}/moe"
profile_text="$repo/docs/design.md"
ember="$repo/build/ember"
threads=2

fail() { echo "mixtral_files.sh: error: $*" >&2; exit 1; }
log() { echo "mixtral_files.sh: $*" >&2; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --dir) dir="$2"; shift 2 ;;
        --profile-text) profile_text="$2"; shift 2 ;;
        --ember) ember="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
        *) fail "unknown option '$1' (--help lists them)" ;;
    esac
done
[[ -x "$ember" ]] || fail "no ember binary at $ember (scripts/setup.sh builds it, or pass --ember PATH)"
[[ -f "$profile_text" ]] || fail "no profile text at $profile_text"
mkdir -p "$dir"

drelu="$dir/mixtral-8x7b-drelu-Q4_0.gguf"
profile="$dir/mixtral-8x7b-drelu-Q4_0.profile"
pack="$dir/mixtral-8x7b-drelu-Q4_0.pack.gguf"
silu="$dir/mixtral-8x7b-silu-Q4_0.gguf"

# need_space GB WHAT: stops before a step that would fill the disk.
need_space() {
    local free_gb
    free_gb=$(( $(df --output=avail -B1 "$dir" | tail -n1) / 1000000000 ))
    (( free_gb >= $1 )) || fail "$2 needs ~$1 GB free in $dir, only $free_gb GB are"
}

if [[ ! -f "$pack" ]]; then
    if [[ ! -f "$drelu" ]]; then
        need_space 28 "the drelu source"
        log "writing $drelu"
        "$ember" synth --preset mixtral-8x7b --type Q4_0 --activation drelu --predictor --predictor-type Q4_0 \
            --threads "$threads" -q -o "$drelu.partial"
        mv "$drelu.partial" "$drelu"
    fi
    if [[ ! -f "$profile" ]]; then
        log "profiling on the first 512 tokens of $profile_text"
        "$ember" profile -m "$drelu" -f "$profile_text" --max-tokens 512 -b 512 -c 1024 -t "$threads" --no-repack \
            -o "$profile"
    fi
    need_space 28 "the pack"
    log "packing into $pack"
    "$ember" pack -m "$drelu" --profile "$profile" -o "$pack"  # pack writes atomically
fi
if [[ -f "$drelu" ]]; then
    log "deleting the source $drelu (the pack holds everything the benchmark reads)"
    rm -f "$drelu"
fi
if [[ ! -f "$silu" ]]; then
    need_space 27 "the SwiGLU file"
    log "writing $silu"
    "$ember" synth --preset mixtral-8x7b --type Q4_0 --threads "$threads" -q -o "$silu.partial"
    mv "$silu.partial" "$silu"
fi

log "done; the benchmark (about 1 hour; the prompt is a different English text than the profile's):"
echo "bench/memcap_bench.sh --model $silu --pack $pack --prompt-file bench/prompts/english-harbour.txt" \
     "--caps \"16G 10G\" --engines \"llama.cpp ember-sparse\" --no-prefetch-variant --runs 3 --gen-tokens 16" \
     "--prompts 128 --repack-check-cap none --timeout 2400"
