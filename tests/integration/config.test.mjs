// Configuration end to end: file < environment < flags as `--print-config` shows them, and a
// setting from a config file reaching a running daemon (SSE keep-alive comments while a long
// prompt is evaluated).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { emberBinary, modelPath } from './helpers/env.mjs';
import { assertCleanStream } from './helpers/expect.mjs';
import { collectStream, request } from './helpers/http.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ember-it-config-'));
after(() => fs.rmSync(dir, { recursive: true, force: true }));

function writeConfig(name, doc) {
  const file = path.join(dir, name);
  fs.writeFileSync(file, JSON.stringify(doc));
  return file;
}

// The environment without the caller's EMBER_* settings, plus `extra`.
function env(extra) {
  const out = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('EMBER_')) out[k] = v;
  return { ...out, ...extra };
}

test('--print-config: flags > environment > file > defaults, API keys masked', () => {
  const file = writeConfig('precedence.json', {
    server: { port: 1111, max_body_bytes: 65536 },
    engine: { queue: 3, parallel: 2 },
    security: { api_keys: ['from-file-secret'] },
  });
  const r = spawnSync(emberBinary, ['serve', '--config', file, '--port', '3333', '--print-config'], {
    env: env({ EMBER_PORT: '2222', EMBER_QUEUE: '5' }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.equal(r.status, 0, `exit ${r.status}: ${r.stderr}`);
  const cfg = JSON.parse(r.stdout);
  assert.equal(cfg.server.port, 3333, 'the flag wins over environment and file');
  assert.equal(cfg.engine.queue, 5, 'the environment wins over the file');
  assert.equal(cfg.engine.parallel, 2, 'the file wins over the default');
  assert.equal(cfg.server.max_body_bytes, 65536);
  assert.equal(cfg.server.host, '127.0.0.1', 'defaults fill the rest');
  assert.ok(!r.stdout.includes('from-file-secret'), 'API keys are not printed');
  // EMBER_CONFIG names the file when --config is absent
  const viaEnv = spawnSync(emberBinary, ['serve', '--print-config'], { env: env({ EMBER_CONFIG: file }), encoding: 'utf8', timeout: 20_000 });
  assert.equal(viaEnv.status, 0, viaEnv.stderr);
  assert.equal(JSON.parse(viaEnv.stdout).server.port, 1111);
});

test('a bad config file stops the daemon with a message naming the key', () => {
  const file = writeConfig('bad.json', { server: { prot: 1 } });
  const r = spawnSync(emberBinary, ['serve', '-m', modelPath, '--config', file], { env: env({}), encoding: 'utf8', timeout: 20_000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /prot/);
});

test('SSE keep-alive comments while a long prompt is evaluated (interval from the config file)', async () => {
  const file = writeConfig('keepalive.json', { server: { keepalive_interval_seconds: 1 } });
  // Batch size 1 makes prefill token by token, so a long prompt takes seconds. How many seconds
  // depends on the machine (a ~3500-token prompt took 1.4 s on the dev VM): double the prompt until
  // its prefill outlasts the 1 s interval with room to spare, within the context.
  const daemon = await startDaemon({ args: ['--config', file, '-c', '16384', '-b', '1'] });
  try {
    const unit = 'the cat sat on the mat and the dog ran in the park. ';
    const t = await request(daemon, { method: 'POST', path: '/tokenize', json: { content: unit } });
    assert.equal(t.status, 200, t.text);
    let s;
    let elapsed = 0;
    for (let tokens = 3500; tokens <= 14000 && elapsed < 1500; tokens *= 2) {
      const prompt = unit.repeat(Math.floor(tokens / t.json.tokens.length));
      const t0 = Date.now();
      s = await collectStream(daemon, { path: '/v1/completions', json: { prompt, max_tokens: 2, temperature: 0, stream: true } });
      elapsed = Date.now() - t0;
      assertCleanStream(s, '/v1/completions');
    }
    if (elapsed < 1500) assert.fail(`a 14000-token prompt took only ${elapsed} ms: too fast to need keep-alive comments; make it longer`);
    assert.ok(s.comments.some((c) => /keep-alive/.test(c)), `": keep-alive" comments during ${elapsed} ms of prefill; got ${JSON.stringify(s.comments)}`);
  } finally {
    await daemon.stop();
  }
});
