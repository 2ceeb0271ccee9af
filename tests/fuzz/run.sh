#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build (cmake -DEMBER_FUZZ=ON, clang) on its seeds (the
# committed corpus plus generated binary seeds, see seed_dir): first each seed once (the regression
# inputs: every crash ever found is kept there), then a bounded fuzzing session per target, two
# targets at a time. New inputs go to a scratch copy of
# the corpus, never into the repository; a crash leaves its input under $EMBER_FUZZ_ARTIFACTS
# (default: a temporary folder) and makes this script fail.
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET=60]
#
# To keep an input found later: copy it into tests/fuzz/corpus/TARGET/ with a name saying what it
# broke, fix the bug, and commit both.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS_PER_TARGET]}"
seconds="${2:-60}"
artifacts="${EMBER_FUZZ_ARTIFACTS:-$(mktemp -d -t ember-fuzz-artifacts.XXXXXX)}"
scratch="$(mktemp -d -t ember-fuzz-corpus.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"

shopt -s nullglob
targets=("$build"/fuzz/fuzz_*)
if ((${#targets[@]} == 0)); then
  echo "fuzz: no fuzz targets in $build/fuzz (configure with -DEMBER_FUZZ=ON and build)" >&2
  exit 1
fi

# A target's seeds: its committed corpus, plus what tests/fuzz/seeds/make_NAME_seeds.py writes
# (binary seeds such as GGUF files are generated, not committed).
seed_dir() {
  local name="$1" dir="$scratch/seeds-$1"
  mkdir -p "$dir"
  [ -d "$here/corpus/$name" ] && cp -r "$here/corpus/$name/." "$dir/"
  [ -f "$here/seeds/make_${name}_seeds.py" ] && python3 "$here/seeds/make_${name}_seeds.py" "$dir"
  echo "$dir"
}

run_target() {
  local bin="$1" name seeds corpus log
  name="$(basename "$bin")"
  name="${name#fuzz_}"
  seeds="$(seed_dir "$name")"
  corpus="$scratch/$name"
  log="$scratch/$name.log"
  mkdir -p "$corpus"
  cp -r "$seeds/." "$corpus/"
  # Regression: every seed once.
  if [ -n "$(ls -A "$seeds")" ] && ! "$bin" -runs=0 "$seeds" >"$log" 2>&1; then
    echo "fuzz: $name FAILED on its seeds"; tail -40 "$log"; return 1
  fi
  # Fuzzing: bounded in time, memory (-rss_limit_mb) and per-input time (-timeout).
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -artifact_prefix="$artifacts/$name-" -print_final_stats=1 "$corpus" >"$log" 2>&1; then
    echo "fuzz: $name FAILED (artifacts in $artifacts)"; tail -60 "$log"; return 1
  fi
  echo "fuzz: $name ok ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs in ${seconds}s)"
}

failed=0
pids=()
for bin in "${targets[@]}"; do
  run_target "$bin" &
  pids+=($!)
  if ((${#pids[@]} >= 2)); then  # two at a time: the machines running this have two cores
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit "$failed"
