#!/usr/bin/env bash
# Regenerates the llama.cpp reference outputs the tests compare with (reference/*.greedy.jsonl of
# the fixtures) from the fixture models, with the llama.cpp build of node-llama-cpp@3.21.1.
#
#   bench/llamacpp/make-references.sh [FIXTURES_DIR [OUT_DIR]]
#
# FIXTURES_DIR (default: the tests' fixtures folder, scripts/fixtures-dir.sh) must hold the models;
# the files go to OUT_DIR/reference (default FIXTURES_DIR). The npm packages are installed, once,
# by setup.sh (same environment: EMBER_CACHE, EMBER_LLAMACPP_DIR, EMBER_LLAMACPP_NPM_DIR).
# Output is deterministic: scripts/fixtures.sha256 holds the hash of each file.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

fixtures="${1:-}"
if [[ -z "$fixtures" ]]; then
    fixtures="$("$repo/scripts/fixtures-dir.sh")" || { echo "make-references: no fixtures folder" >&2; exit 1; }
fi
out="${2:-$fixtures}"

# setup.sh owns the npm install (and builds peer_bench, which this script does not use).
"$here/setup.sh" >/dev/null
npm_dir="${EMBER_LLAMACPP_NPM_DIR:-${EMBER_LLAMACPP_DIR:-${EMBER_CACHE:-$HOME/.cache/ember}/llamacpp}/npm}"
node "$here/make_references.mjs" "$npm_dir" "$fixtures" "$out"
