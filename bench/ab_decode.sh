#!/usr/bin/env bash
# Decode speed of two ember binaries, alternating: A, B, A, B, ... so that drift on a shared
# machine (other jobs, thermal state, page cache) falls on both alike. Each run is one
# `BIN bench ARGS --json`; the script prints every run's decode tokens/s and each side's median.
#
# usage: bench/ab_decode.sh [--rounds 3] BIN_A BIN_B -- BENCH_ARGS...
#   e.g. bench/ab_decode.sh /tmp/base/build/ember build/ember -- -m model.gguf --sparse predictor \
#          --prompt-tokens 16 --gen-tokens 32 --runs 3
set -euo pipefail

rounds=3
if [[ "${1:-}" == --rounds ]]; then rounds="$2"; shift 2; fi
if [[ $# -lt 3 || "$3" != -- ]]; then
    echo "usage: $0 [--rounds N] BIN_A BIN_B -- BENCH_ARGS..." >&2
    exit 2
fi
bin_a="$1"; bin_b="$2"; shift 3

decode_rate() {  # BIN ARGS...: one bench run's decode tokens/s (the median of its --runs)
    local bin="$1"; shift
    "$bin" bench "$@" --json 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.readlines()[-1])["decode_tokens_per_s"])'
}

a_runs=(); b_runs=()
for ((r = 1; r <= rounds; ++r)); do
    a=$(decode_rate "$bin_a" "$@"); a_runs+=("$a")
    b=$(decode_rate "$bin_b" "$@"); b_runs+=("$b")
    echo "round $r: A $a  B $b"
done
python3 - "${a_runs[*]}" "${b_runs[*]}" <<'PY'
import statistics, sys
a = [float(v) for v in sys.argv[1].split()]
b = [float(v) for v in sys.argv[2].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"median decode tok/s: A {ma:.2f}  B {mb:.2f}  B/A {mb / ma:.3f}")
PY
