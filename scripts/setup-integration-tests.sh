#!/usr/bin/env bash
# Installs the exact npm packages the integration tests use (tests/integration/package-lock.json):
# the official `openai` client, the AI SDK (`ai`, `@ai-sdk/openai-compatible`), LangChain
# (`@langchain/openai`, `@langchain/core`), zod, ajv (+ ajv-formats) for the OpenAPI schemas, yaml. Needs Node.js 20+
# and npm; run once after cloning, then `ctest -R integration_http` or tests/integration/run.sh.
set -euo pipefail
cd "$(dirname "$0")/../tests/integration"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup-integration-tests: node and npm are needed (Node.js 20 or newer)" >&2
  exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "setup-integration-tests: node $(node --version) is too old (20 or newer is needed)" >&2
  exit 1
fi

npm ci --no-audit --no-fund
echo "setup-integration-tests: installed into tests/integration/node_modules" >&2
