// A mixture-of-experts model served under a memory budget: a synthetic TurboSparse-Mixtral-like
// file (moe-tiny: 8 dReLU experts, 2 per token, predictors), profiled and packed by the CLI, then
// `ember serve --memory-budget 50% --sparse predictor` on the pack. Greedy answers must be what
// `ember run` gives on the same pack all in memory, and /metrics must show the routing and the
// neuron cache at work.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { emberBinary } from './helpers/env.mjs';
import { request } from './helpers/http.mjs';
import { assertResponse } from './helpers/schema.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ember-moe-'));
const source = path.join(dir, 'moe-tiny-drelu.gguf');
const pack = path.join(dir, 'moe-tiny-drelu.pack.gguf');
let daemon;

function ember(args) {
  const r = spawnSync(emberBinary, args, { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, `ember ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

before(async () => {
  ember(['synth', '--preset', 'moe-tiny', '--type', 'Q8_0', '--activation', 'drelu', '--predictor', '-o', source]);
  const text = path.join(dir, 'calibration.txt');
  fs.writeFileSync(text, 'The little dog ran to the river. Once upon a time, an old man sat by the sea and read a book about the stars. '.repeat(6));
  const profile = path.join(dir, 'moe.profile.gguf');
  ember(['profile', '-m', source, '-f', text, '-o', profile, '-t', '1']);
  ember(['pack', '-m', source, '--profile', profile, '-o', pack]);
  daemon = await startDaemon({ model: pack, args: ['--memory-budget', '50%', '--sparse', 'predictor', '--activation-state', ''] });
});

after(async () => {
  const exit = await daemon?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  assert.deepEqual(exit, { code: 0, signal: null }, 'the daemon exits 0 on SIGTERM');
});

test('a greedy completion under the budget is the all-in-memory one', async () => {
  const prompt = 'Once upon a time';
  const res = await request(daemon, { method: 'POST', path: '/v1/completions', json: { prompt, max_tokens: 24, temperature: 0 } });
  assert.equal(res.status, 200, res.text);
  assertResponse('POST', '/v1/completions', res);
  const expected = ember(['run', '-m', pack, '-t', '1', '-p', prompt, '-n', '24', '--temp', '0', '--sparse', 'predictor']);
  assert.equal(res.json.choices[0].text, expected);
});

test('a chat completion on the MoE pack, and /metrics with routing and cache counters', async () => {
  const res = await request(daemon, {
    method: 'POST',
    path: '/v1/chat/completions',
    json: { messages: [{ role: 'user', content: 'Tell me about the sea.' }], max_tokens: 16, temperature: 0 },
  });
  assert.equal(res.status, 200, res.text);
  assertResponse('POST', '/v1/chat/completions', res);
  assert.equal(res.json.choices[0].message.role, 'assistant');
  assert.ok(res.json.choices[0].message.content.length > 0);
  const metrics = await request(daemon, { path: '/metrics' });
  assert.equal(metrics.status, 200);
  assert.match(metrics.text, /^ember_moe_expert_routed_total\{layer="1",expert="7"\} \d+$/m);
  assert.match(metrics.text, /^ember_neuron_cache_misses_total [1-9]\d*$/m, 'cold bundles were read from the pack');
  assert.match(metrics.text, /^ember_sparse_info\{mode="predictor"\} 1$/m);
});
