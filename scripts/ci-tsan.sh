#!/usr/bin/env bash
# ThreadSanitizer pass over the multi-threaded parts of Ember: the engine (thread pool, kernels,
# model, neuron cache, I/O backends) and the HTTP server (engine thread + Asio I/O threads).
#
#   scripts/ci-tsan.sh                 # configure + build build-tsan/, run the tests, exit 1 on any report
#   JOBS=2 scripts/ci-tsan.sh          # fewer build jobs (default: nproc)
#   EMBER_TSAN_TESTS="server io" scripts/ci-tsan.sh     # a subset of the test binaries
#   EMBER_TSAN_SOAK_SECONDS=0 scripts/ci-tsan.sh        # skip the daemon soak under TSan
#   EMBER_TSAN_BUILD_DIR=/tmp/bt scripts/ci-tsan.sh     # another build folder
#
# It builds only test_io, test_cache, test_kernels, test_model, test_server and the `ember` CLI
# (RelWithDebInfo, so the reports carry file:line; warnings are errors), runs each test binary with
#   TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=tests/tsan.supp
# and then, when python3 and the stories260K fixture are there, runs a short soak (-t 2,
# --io-threads 2: pool workers and two Asio threads)
# (tests/soak/soak.py, concurrent streams with disconnects) against build-tsan/ember, whose
# reports go to the daemon's stderr (the soak fails when the daemon dies of one).
#
# tests/tsan.supp suppresses races inside third-party code only (each line says why); a race in
# Ember's own code is never suppressed: fix it.
#
# Exit: 0 clean; 1 a TSan report (or a test failure); 2 the build failed. A test binary that exits
# 77 (its other cases passed; the fixture cases skipped: fixtures absent) counts as skipped. Every
# log is kept in $BUILD_DIR/tsan-logs/ and the reports are printed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

build_dir=${EMBER_TSAN_BUILD_DIR:-build-tsan}
jobs=${JOBS:-$(nproc)}
tests=${EMBER_TSAN_TESTS:-"io cache kernels model server"}
soak_seconds=${EMBER_TSAN_SOAK_SECONDS:-20}
supp="$repo/tests/tsan.supp"
logs="$build_dir/tsan-logs"

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$repo"
fi

start=$(date +%s)
echo "ci-tsan: configuring $build_dir" >&2
if ! cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE_THREAD=ON -DEMBER_WERROR=ON \
      "${launcher[@]}" >/dev/null; then
  echo "ci-tsan: configure failed" >&2
  exit 2
fi
# A CMakeLists.txt without the option would ignore it (with a mere warning) and build plain
# binaries that can report nothing: make sure the flags are really there.
if ! grep -q -- "-fsanitize=thread" "$build_dir/compile_commands.json" 2>/dev/null; then
  echo "ci-tsan: $build_dir is not configured with -fsanitize=thread (does CMakeLists.txt have EMBER_SANITIZE_THREAD?)" >&2
  exit 2
fi
targets=(ember)
for t in $tests; do targets+=("test_$t"); done
echo "ci-tsan: building ${targets[*]} (-j$jobs)" >&2
if ! cmake --build "$build_dir" -j"$jobs" --target "${targets[@]}"; then
  echo "ci-tsan: build failed" >&2
  exit 2
fi
built=$(date +%s)
# (grep -c reads all of nm's output: grep -q would stop early, and pipefail then reports nm's SIGPIPE)
if [ "$(nm -D "$build_dir/ember" 2>/dev/null | grep -c '__tsan_func_entry')" -eq 0 ]; then
  echo "ci-tsan: $build_dir/ember is not instrumented (no __tsan_func_entry)" >&2
  exit 2
fi
echo "ci-tsan: build took $((built - start)) s" >&2

mkdir -p "$logs"
rm -f "$logs"/*.log

# Some kernels randomise mmap addresses more than the TSan runtime of GCC 12 / LLVM < 18 can
# map its shadow around ("FATAL: ThreadSanitizer: unexpected memory mapping"); running without
# ASLR avoids that without touching the machine's settings.
norandom=()
if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  norandom=(setarch "$(uname -m)" -R)
fi

export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:exitcode=66:suppressions=$supp${EMBER_TSAN_EXTRA_OPTIONS:+:$EMBER_TSAN_EXTRA_OPTIONS}"
failed=()
skipped=()

for t in $tests; do
  bin="$build_dir/test_$t"
  log="$logs/test_$t.log"
  if [ ! -x "$bin" ]; then
    echo "ci-tsan: $bin missing" >&2
    failed+=("test_$t(missing)")
    continue
  fi
  t0=$(date +%s)
  "${norandom[@]}" "$bin" >"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  if [ "$rc" -eq 77 ]; then
    skipped+=("test_$t")
    echo "ci-tsan: test_$t passed, its fixture cases SKIPPED (fixtures absent) in $((t1 - t0)) s" >&2
  elif [ "$rc" -ne 0 ] || grep -q "WARNING: ThreadSanitizer" "$log"; then
    failed+=("test_$t(rc=$rc)")
    echo "ci-tsan: test_$t FAILED (exit $rc) in $((t1 - t0)) s: $log" >&2
  else
    echo "ci-tsan: test_$t ok in $((t1 - t0)) s" >&2
  fi
done

# The daemon itself under TSan: concurrent streams, disconnects, /metrics, SIGTERM.
fixtures=$(scripts/fixtures-dir.sh) || fixtures=""
if [ "$soak_seconds" -gt 0 ] && command -v python3 >/dev/null 2>&1 && [ -n "$fixtures" ] &&
   [ -f "$fixtures/models/stories260K.gguf" ] && [ -x "$build_dir/ember" ]; then
  log="$logs/soak.log"
  t0=$(date +%s)
  # RSS under TSan includes its shadow memory and history: the RSS bound is loosened; the daemon's
  # stderr (and so every report) is kept in the log by --daemon-log.
  EMBER_BINARY="$build_dir/ember" EMBER_FIXTURES="$fixtures" "${norandom[@]}" \
    python3 tests/soak/soak.py --seconds "$soak_seconds" --clients 8 --threads 2 --io-threads 2 --rss-bound-mib 512 \
      --daemon-log "$logs/soak-daemon.log" --startup-timeout 120 >"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  if [ "$rc" -eq 77 ]; then
    skipped+=("soak")
  elif [ "$rc" -ne 0 ] || grep -q "WARNING: ThreadSanitizer" "$logs/soak-daemon.log" 2>/dev/null; then
    failed+=("soak(rc=$rc)")
    echo "ci-tsan: soak under TSan FAILED (exit $rc) in $((t1 - t0)) s: $log, $logs/soak-daemon.log" >&2
    # CI keeps only what is printed: the soak's own verdict (what failed, the daemon's last words).
    tail -n 60 "$log" >&2
  else
    echo "ci-tsan: soak under TSan ok in $((t1 - t0)) s" >&2
  fi
else
  skipped+=("soak")
fi

end=$(date +%s)
reports=$(grep -l "WARNING: ThreadSanitizer" "$logs"/*.log 2>/dev/null)
if [ -n "$reports" ]; then
  echo "ci-tsan: ThreadSanitizer reports:" >&2
  for f in $reports; do
    echo "===== $f" >&2
    # The report proper: from the WARNING line to its SUMMARY.
    sed -n '/WARNING: ThreadSanitizer/,/SUMMARY: ThreadSanitizer/p' "$f" | head -200 >&2
  done
fi
echo "ci-tsan: build $((built - start)) s, run $((end - built)) s;" \
  "failed: ${failed[*]:-none}; skipped: ${skipped[*]:-none}" >&2
[ ${#failed[@]} -eq 0 ] || exit 1
exit 0
