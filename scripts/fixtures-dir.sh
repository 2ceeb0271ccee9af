#!/usr/bin/env bash
# Prints the test fixtures folder and exits 0, or prints nothing and exits 1 when there is none.
# The order is the one of the C++ tests (tests/support/fixtures.h) and tests/soak/harness.py:
#   1. $EMBER_FIXTURES when set (an explicit choice: if it is not a folder, there are no fixtures);
#   2. ../shared/fixtures beside the repository;
#   3. tests/fixtures/ in the repository (scripts/fetch-fixtures.sh downloads them there).
set -u
repo="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${EMBER_FIXTURES:-}" ]; then
  candidates=("$EMBER_FIXTURES")
else
  candidates=("$repo/../shared/fixtures" "$repo/tests/fixtures")
fi
for dir in "${candidates[@]}"; do
  if [ -d "$dir" ]; then
    (cd "$dir" && pwd)
    exit 0
  fi
done
exit 1
