#!/usr/bin/env bash
# Cross-compiles Ember for aarch64 into build-aarch64/: a statically linked `ember` (and the test
# binaries) that runs on any aarch64 Linux kernel, Android's included, and under qemu-aarch64,
# without a sysroot. Debian 12: g++-aarch64-linux-gnu plus the arm64 multiarch libraries
# (scripts/aarch64-packages.txt, with `file` for the final check); the header-only libraries are
# the host's (scripts/debian-packages.txt).
# Usage: scripts/build-aarch64.sh [--ci] [extra cmake args...]   (EMBER_JOBS=N to set the parallelism)
#   --ci: only `ember` and the test binaries that scripts/test-aarch64.sh --ci runs
#         (scripts/aarch64-ci-tests.txt), to keep CI within its time
#
# Static glibc cannot serve NSS lookups (getaddrinfo, getpwnam) or dlopen without the build's
# glibc on the target. Ember makes none (numeric listen addresses), so the link is warning-free;
# if the linker ever warns "Using 'getaddrinfo' in statically linked applications", that call
# will fail on Android (docs/arm64.md).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
if [ "${1:-}" = --ci ]; then
  shift
  mapfile -t targets < <(grep -v '^#' scripts/aarch64-ci-tests.txt)
  targets=(--target ember "${targets[@]}")
fi

mapfile -t packages < <(cat scripts/debian-packages.txt scripts/aarch64-packages.txt)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "build-aarch64: installing ${missing[*]}" >&2
  # The :arm64 packages need the architecture enabled before apt-get update sees their lists.
  dpkg --print-foreign-architectures | grep -qx arm64 || $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then
  # Paths relative to the checkout, so that two clones (CI, worktrees) share cache entries.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
  "${launcher[@]}" "$@" >/dev/null
cmake --build build-aarch64 -j"${EMBER_JOBS:-$(nproc)}" "${targets[@]}"
file build-aarch64/ember | grep -q "ARM aarch64.*statically linked" ||
  { echo "build-aarch64: build-aarch64/ember is not a static aarch64 executable: $(file -b build-aarch64/ember)" >&2; exit 1; }
echo "build-aarch64: built build-aarch64/ember ($(file -b build-aarch64/ember | cut -d, -f1-2), static)" >&2
