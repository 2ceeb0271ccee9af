#!/usr/bin/env bash
# Runs the aarch64 build (scripts/build-aarch64.sh, into build-aarch64/) under qemu-aarch64 user
# mode, once per emulated CPU:
#   -cpu max         every extension qemu knows (dotprod, i8mm, fp16): the widest ARM kernel set;
#   -cpu cortex-a53  plain ARMv8.0 NEON (no dotprod/fp16): the baseline kernel set.
# What runs, per CPU (the subset that fits ~15 minutes on 2 cores; CI runs this, see .ci/run):
#   - every unit-test binary, its no-fixture cases (ctest's `X` entries) and its fixture cases
#     (`X_fixtures`: the greedy references of stories260K v3/v1 and llama-2-tiny-random, the
#     tokenizer vocabularies), each with the kernels the CPU dispatch picks;
#   - the cpu_features check against what the emulated CPU is known to have;
#   - `ember run -m stories260K.gguf --temp 0` on the first reference prompt: the text must be
#     llama.cpp's greedy continuation, byte for byte;
#   - a smoke test of the static `ember serve`: start it on a free TCP port and a Unix socket,
#     one streamed chat completion over each with curl, SIGTERM, exit code 0.
# test_synth (the synthetic-model generator, ~5 of the ~9 minutes per CPU) runs under -cpu max only:
# it has no code of its own that depends on the CPU's extensions, and the kernels it calls are
# tested under both CPUs by test_kernels.
# Left to the x86 stages of .ci/run (they test no architecture-specific code, or need a second
# process that would itself have to run under qemu): test_tools (spawns the ember binary), the
# *_scalar repeats of ctest, the Node integration tests, hostile_http, the soak, the sanitizers.
# --ci (what .ci/run uses, with scripts/build-aarch64.sh --ci, to keep CI within its time): only the
# binaries of scripts/aarch64-ci-tests.txt run: under -cpu max all of them (I/O backends with the
# io_uring refusal, kernels, tokenizers, model greedy references, sparse FFN, packs), under every
# other CPU only those whose code depends on the CPU's extensions (kernels, model, sparse, pack);
# then the greedy run and the serve smoke test on each CPU.
# Usage: scripts/test-aarch64.sh [--ci] [cpu...]   (default: max cortex-a53)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${EMBER_AARCH64_BUILD:-build-aarch64}"
qemu="${QEMU_AARCH64:-qemu-aarch64}"
ci=false
if [ "${1:-}" = --ci ]; then ci=true; shift; fi
cpus=("$@")
((${#cpus[@]})) || cpus=(max cortex-a53)
command -v "$qemu" >/dev/null || { echo "test-aarch64: $qemu not found (apt-get install qemu-user)" >&2; exit 1; }
[ -x "$build/ember" ] || { echo "test-aarch64: no $build/ember (run scripts/build-aarch64.sh)" >&2; exit 1; }
fixtures="$(scripts/fixtures-dir.sh)" || fixtures=""
export EMBER_FIXTURES="${fixtures:-/nonexistent}"  # the test binaries then skip (77) their fixture cases

failures=()
run_binary() {  # cpu, label, argv...: 0 and 77 (skipped) pass
  local cpu=$1 label=$2 rc=0 t0=$SECONDS
  shift 2
  "$qemu" -cpu "$cpu" "$@" >"$log_dir/$label.log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then
    echo "  ok   $label ($((SECONDS - t0)) s$([ "$rc" -eq 77 ] && echo ", skipped"))"
  else
    echo "  FAIL $label (exit $rc, $((SECONDS - t0)) s); its log:"
    tail -n 40 "$log_dir/$label.log" | sed 's/^/    /'
    failures+=("$cpu:$label")
  fi
}

# The smoke test of the daemon: one streamed chat completion over TCP and one over a Unix socket.
serve_smoke() {
  local cpu=$1 dir="$log_dir/serve" port="" rc=0 t0=$SECONDS
  mkdir -p "$dir"
  local model="$fixtures/models/stories260K.gguf"
  [ -f "$model" ] || { echo "  skip serve (no fixture $model)"; return 0; }
  # EMBER_* variables are settings of the daemon: pass none of this script's.
  env -u EMBER_FIXTURES -u EMBER_EXPECT_ARM_FEATURES "$qemu" -cpu "$cpu" "$build/ember" serve -m "$model" -t 2 \
    --port 0 --listen "unix:$dir/ember.sock" >"$dir/log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do  # up to 60 s: model load under emulation
    port="$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$dir/log" | head -n1)"
    [ -n "$port" ] && [ -S "$dir/ember.sock" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  local body='{"stream":true,"max_tokens":8,"messages":[{"role":"user","content":"Once upon a time"}]}'
  local ok=1
  if [ -z "$port" ]; then
    ok=0
  else
    curl -sS --max-time 120 -N -H 'Content-Type: application/json' -d "$body" \
      "http://127.0.0.1:$port/v1/chat/completions" >"$dir/tcp.sse" || ok=0
    curl -sS --max-time 120 -N --unix-socket "$dir/ember.sock" -H 'Content-Type: application/json' -d "$body" \
      "http://localhost/v1/chat/completions" >"$dir/unix.sse" || ok=0
    for f in tcp unix; do
      grep -q '"delta"' "$dir/$f.sse" && grep -q '^data: \[DONE\]' "$dir/$f.sse" || ok=0
    done
  fi
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || rc=$?
  if [ "$ok" -eq 1 ] && [ "$rc" -eq 0 ]; then
    echo "  ok   serve: streamed chat completion over TCP and unix:, SIGTERM -> exit 0 ($((SECONDS - t0)) s)"
  else
    echo "  FAIL serve (stream ok=$ok, exit $rc); its log and streams:"
    tail -n 30 "$dir/log" "$dir"/*.sse 2>/dev/null | sed 's/^/    /'
    failures+=("$cpu:serve")
  fi
}

# The command line itself against llama.cpp's greedy text (the first prompt of the reference file).
greedy_run() {
  local cpu=$1 t0=$SECONDS ref="$fixtures/reference/stories260K.greedy.jsonl" model="$fixtures/models/stories260K.gguf"
  [ -f "$ref" ] && [ -f "$model" ] || { echo "  skip run (no fixtures)"; return 0; }
  local prompt want
  prompt="$(head -n1 "$ref" | python3 -c 'import json,sys; print(json.load(sys.stdin)["prompt"], end="")')"
  want="$(head -n1 "$ref" | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"], end="")')"
  local got rc=0
  got="$("$qemu" -cpu "$cpu" "$build/ember" run -m "$model" -p "$prompt" -n 64 --temp 0 2>"$log_dir/run.log")" || rc=$?
  if [ "$rc" -eq 0 ] && [ "$got" = "$want" ]; then
    echo "  ok   ember run: llama.cpp's greedy text for \"$prompt\" ($((SECONDS - t0)) s)"
  else
    echo "  FAIL ember run (exit $rc): got"; printf '%s\n' "$got" | sed 's/^/    /'
    echo "  want"; printf '%s\n' "$want" | sed 's/^/    /'
    failures+=("$cpu:run")
  fi
}

SECONDS=0
for cpu in "${cpus[@]}"; do
  log_dir="$build/qemu-logs/$cpu"
  rm -rf "$log_dir" && mkdir -p "$log_dir"
  case "$cpu" in
    max) expect="dotprod,i8mm,fp16" ;;
    cortex-a53) expect="none" ;;
    *) expect="" ;;  # unknown to this script: report, do not check
  esac
  echo "=== qemu-aarch64 -cpu $cpu"
  for bin in "$build"/test_*; do
    name="$(basename "$bin")"
    [ "$name" = test_tools ] && continue  # spawns build-aarch64/ember itself: see the header
    [ "$name" = test_synth ] && { [ "$cpu" != max ] || $ci; } && continue  # see the header
    if $ci; then
      grep -qx "$name" scripts/aarch64-ci-tests.txt || continue
      if [ "$cpu" != max ]; then
        case "$name" in test_kernels | test_model | test_sparse | test_pack) ;; *) continue ;; esac
      fi
    fi
    if [ -n "$expect" ]; then export EMBER_EXPECT_ARM_FEATURES="$expect"; else unset EMBER_EXPECT_ARM_FEATURES; fi
    run_binary "$cpu" "$name" "$bin" --fixtures=exclude
    grep -q needs_fixtures tests/"${name#test_}"/*.cpp 2>/dev/null &&
      run_binary "$cpu" "${name}_fixtures" "$bin" --fixtures=only
  done
  greedy_run "$cpu"
  serve_smoke "$cpu"
done
echo "test-aarch64: ${SECONDS} s"
if ((${#failures[@]})); then
  echo "test-aarch64: FAILED: ${failures[*]} (logs in $build/qemu-logs/)" >&2
  exit 1
fi
echo "test-aarch64: all passed on ${cpus[*]}"
