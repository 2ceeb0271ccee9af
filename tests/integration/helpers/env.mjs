// Where the binary, the fixtures and the API document are. run.sh checks they exist before any
// test starts; these are the same rules, so a direct `node --test` finds the same files.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const emberBinary = process.env.EMBER_BINARY || path.join(repoRoot, 'build', 'ember');
// run.sh exports the folder scripts/fixtures-dir.sh chose; a direct `node --test` asks the script.
export const fixturesDir = process.env.EMBER_FIXTURES ||
  execFileSync(path.join(repoRoot, 'scripts', 'fixtures-dir.sh'), { encoding: 'utf8' }).trim();
export const modelPath = path.join(fixturesDir, 'models', 'stories260K.gguf');
export const openapiPath = path.join(repoRoot, 'api', 'openapi.yaml');
