#!/usr/bin/env bash
# Installs the Debian 12 packages Ember needs (when missing) and builds it into build/.
# Usage: scripts/setup.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t packages < scripts/debian-packages.txt
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ccache, when installed, makes rebuilds (and CI's several configurations) cheap.
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built build/ember" >&2

# The HTTP integration tests need Node.js 20+ and a few npm packages; without them ctest reports
# integration_http as skipped, so this is best-effort here (.ci/run requires it).
if [ ! -d tests/integration/node_modules/openai ] && command -v npm >/dev/null 2>&1; then
  scripts/setup-integration-tests.sh >/dev/null ||
    echo "setup: the integration test packages could not be installed (integration_http will be skipped)" >&2
fi
