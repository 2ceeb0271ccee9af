// `--listen unix:/path`: the same API on a Unix domain socket (what Android and desktop apps use),
// next to the TCP port. The daemon runs with --alias, which /v1/models and responses report.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { assertCleanStream } from './helpers/expect.mjs';

const MODEL_ID = 'tiny-stories';  // --alias
import { collectStream, request } from './helpers/http.mjs';
import { assertResponse } from './helpers/schema.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ember-it-'));
const socketPath = path.join(dir, 'ember.sock');
let daemon;
before(async () => {
  daemon = await startDaemon({ args: ['--alias', 'tiny-stories', '--listen', `unix:${socketPath}`] });
});
after(async () => {
  await daemon?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const unix = { socketPath };

test('the socket exists and answers /health and /v1/models', async () => {
  assert.ok(fs.statSync(socketPath).isSocket(), `${socketPath} is a socket`);
  const health = await request(unix, { path: '/health' });
  assert.equal(health.status, 200, health.text);
  assertResponse('GET', '/health', health);
  const models = await request(unix, { path: '/v1/models' });
  assert.equal(models.status, 200, models.text);
  assertResponse('GET', '/v1/models', models);
  assert.equal(models.json.data[0].id, MODEL_ID);
});

test('completions over the socket equal those over TCP, streamed and not', async () => {
  const body = { prompt: 'Once upon a time', max_tokens: 20, temperature: 0 };
  const overUnix = await request(unix, { method: 'POST', path: '/v1/completions', json: body });
  assert.equal(overUnix.status, 200, overUnix.text);
  assertResponse('POST', '/v1/completions', overUnix);
  const overTcp = await request(daemon, { method: 'POST', path: '/v1/completions', json: body });
  assert.equal(overUnix.json.choices[0].text, overTcp.json.choices[0].text);
  assert.equal(overUnix.json.model, MODEL_ID, 'responses name the --alias');

  const s = await collectStream(unix, {
    path: '/v1/chat/completions',
    json: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 12, temperature: 0, stream: true },
  });
  assertCleanStream(s, '/v1/chat/completions');
});

test('errors over the socket have the same shape', async () => {
  const res = await request(unix, { method: 'POST', path: '/v1/chat/completions', json: { messages: 'x' } });
  assert.equal(res.status, 400, res.text);
  assertResponse('POST', '/v1/chat/completions', res);
});
