#!/usr/bin/env bash
# Runs the end-to-end tests of `ember serve` (node --test). ctest calls this (test
# integration_http); it can also be run by hand: tests/integration/run.sh [node --test args...]
#
#   EMBER_BINARY    the ember binary (default: build/ember under the repository root)
#   EMBER_FIXTURES  the fixtures folder (default: ../shared/fixtures next to the repository, then
#                   tests/fixtures; see scripts/fixtures-dir.sh)
#
# Exit code 77 (ctest: Skipped) with a visible SKIPPED line when something the tests need is
# absent: node, the npm packages (run scripts/setup-integration-tests.sh), the model fixture, or
# the binary.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export EMBER_BINARY="${EMBER_BINARY:-$root/build/ember}"

skip() {
  echo "SKIPPED: integration tests: $*"
  exit 77
}

EMBER_FIXTURES="$("$root/scripts/fixtures-dir.sh")" ||
  skip "fixture models/stories260K.gguf not found: no fixtures folder (set EMBER_FIXTURES or run scripts/fetch-fixtures.sh)"
export EMBER_FIXTURES

command -v node >/dev/null 2>&1 || skip "node is not installed (Node.js 20 or newer is needed)"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] 2>/dev/null || skip "node $(node --version) is too old (20 or newer is needed)"
[ -d "$here/node_modules/openai" ] && [ -d "$here/node_modules/ai" ] && [ -d "$here/node_modules/@langchain/openai" ] && [ -d "$here/node_modules/ajv" ] && [ -d "$here/node_modules/yaml" ] ||
  skip "the npm packages are not installed (run scripts/setup-integration-tests.sh)"
[ -f "$EMBER_FIXTURES/models/stories260K.gguf" ] ||
  skip "fixture $EMBER_FIXTURES/models/stories260K.gguf not found (set EMBER_FIXTURES or run scripts/fetch-fixtures.sh)"
[ -x "$EMBER_BINARY" ] || skip "no ember binary at $EMBER_BINARY (build it, or set EMBER_BINARY)"

cd "$here" || exit 1
# One file at a time: each starts its own daemons, and the machines running this may have two cores.
exec node --test --test-concurrency=1 --test-timeout=120000 "$@" ./*.test.mjs
