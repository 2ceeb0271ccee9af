// Several models by name from --models-dir: the list, load on first use, unknown and path-like ids
// (404, never another model's answer, never a file outside the directory), keep_alive 0 and the
// idle unload, the unload endpoint, the memory limit across models (eviction of the idle one, a
// 503 naming the need), and a load that does not hold up requests to a loaded model.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { fixturesDir, modelPath } from './helpers/env.mjs';
import { assertError } from './helpers/expect.mjs';
import { request } from './helpers/http.mjs';
import { assertResponse } from './helpers/schema.mjs';

const tinyPath = path.join(fixturesDir, 'models', 'llama-2-tiny-random.gguf');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// <tmp>/models/{stories,tiny}.gguf (copies), <tmp>/secret.gguf outside, and models/escape.gguf, a
// symlink to it that the daemon must not follow out of the directory.
function modelsDir() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'ember-models-'));
  const dir = path.join(root, 'models');
  fs.mkdirSync(dir);
  fs.copyFileSync(modelPath, path.join(dir, 'stories.gguf'));
  fs.copyFileSync(tinyPath, path.join(dir, 'tiny.gguf'));
  fs.copyFileSync(modelPath, path.join(root, 'secret.gguf'));
  fs.symlinkSync(path.join(root, 'secret.gguf'), path.join(dir, 'escape.gguf'));
  return { root, dir };
}

const complete = (daemon, body) =>
  request(daemon, { method: 'POST', path: '/v1/completions', json: { prompt: 'Once upon a time', max_tokens: 6, temperature: 0, ...body } });

async function listed(daemon) {
  const res = await request(daemon, { path: '/v1/models' });
  assert.equal(res.status, 200, res.text);
  assertResponse('GET', '/v1/models', res);
  return Object.fromEntries(res.json.data.map((m) => [m.id, m.ember]));
}

async function until(what, check, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(50);
  }
  assert.fail(`${what}: not within ${ms} ms`);
}

describe('several models from a directory', () => {
  let daemon;
  let dirs;
  before(async () => {
    dirs = modelsDir();
    daemon = await startDaemon({ model: null, args: ['--models-dir', dirs.dir, '--keep-alive', '2s'] });
  });
  after(async () => {
    await daemon?.stop();
    fs.rmSync(dirs.root, { recursive: true, force: true });
  });

  test('GET /v1/models lists the directory, nothing loaded yet, the symlink out is not there', async () => {
    const models = await listed(daemon);
    assert.deepEqual(Object.keys(models).sort(), ['stories', 'tiny']);
    assert.equal(models.stories.loaded, false);
    assert.equal(models.stories.size_bytes, fs.statSync(modelPath).size);
    assert.match(daemon.output, /skipping escape\.gguf: .*outside the directory/);
  });

  test('a request loads the model it names, and each model answers as itself', async () => {
    const a = await complete(daemon, { model: 'stories' });
    assert.equal(a.status, 200, a.text);
    assert.equal(a.json.model, 'stories');
    let models = await listed(daemon);
    assert.equal(models.stories.loaded, true);
    assert.equal(models.tiny.loaded, false, 'only the named model loads');
    assert.ok(models.stories.memory_bytes > 0);

    const b = await complete(daemon, { model: 'tiny' });
    assert.equal(b.status, 200, b.text);
    assert.equal(b.json.model, 'tiny');
    assert.notEqual(b.json.choices[0].text, a.json.choices[0].text, 'a different model, a different answer');
    models = await listed(daemon);
    assert.equal(models.tiny.loaded, true);
    // The same request again: the same greedy answer from the loaded model.
    const again = await complete(daemon, { model: 'stories' });
    assert.equal(again.json.choices[0].text, a.json.choices[0].text);
  });

  test('unknown and path-like ids are 404 model_not_found; no id is a 400 when several are served', async () => {
    for (const model of ['nothere', '../models/stories', 'escape', 'secret', '../secret', dirs.dir + '/stories',
                         path.join(dirs.root, 'secret.gguf'), 'stories.gguf', '%2e%2e/secret']) {
      const res = await complete(daemon, { model });
      assertError(res, 404, { method: 'POST', template: '/v1/completions', param: 'model', code: 'model_not_found', what: model });
      assert.match(res.json.error.message, /'stories', 'tiny'/);
      const chat = await request(daemon, { method: 'POST', path: '/v1/chat/completions',
                                           json: { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 } });
      assertError(chat, 404, { code: 'model_not_found', what: `chat ${model}` });
    }
    for (const id of ['escape', 'nothere', '..%2Fsecret']) {
      const res = await request(daemon, { path: `/v1/models/${id}` });
      assertError(res, 404, { code: 'model_not_found', what: `GET /v1/models/${id}` });
    }
    const none = await complete(daemon, {});
    assertError(none, 400, { param: 'model', code: 'model_required' });
  });

  test('keep_alive 0 unloads after the request; otherwise the model goes after the idle time', async () => {
    const res = await complete(daemon, { model: 'tiny', keep_alive: 0 });
    assert.equal(res.status, 200, res.text);
    await until('tiny unloaded after keep_alive 0', async () => !(await listed(daemon)).tiny.loaded, 3000);
    const s = await complete(daemon, { model: 'stories' });
    assert.equal(s.status, 200);
    const models = await listed(daemon);
    assert.equal(models.stories.loaded, true);
    assert.ok(models.stories.unloads_in_seconds > 0 && models.stories.unloads_in_seconds <= 2, JSON.stringify(models.stories));
    await until('stories unloaded after --keep-alive 2s', async () => !(await listed(daemon)).stories.loaded);
    assert.match(daemon.output, /unloaded model 'stories' \(idle for its keep-alive\)/);
    const bad = await complete(daemon, { model: 'stories', keep_alive: '5 minutes' });
    assertError(bad, 400, { param: 'keep_alive' });
  });

  test('POST /v1/models/{id}/unload unloads a loaded model; unknown ids are 404', async () => {
    assert.equal((await complete(daemon, { model: 'tiny', keep_alive: -1 })).status, 200);
    let res = await request(daemon, { method: 'POST', path: '/v1/models/tiny/unload' });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { id: 'tiny', object: 'model', status: 'unloaded' });
    assert.equal((await listed(daemon)).tiny.loaded, false);
    res = await request(daemon, { method: 'POST', path: '/v1/models/tiny/unload' });
    assert.equal(res.json.status, 'not_loaded');
    res = await request(daemon, { method: 'POST', path: '/v1/models/nothere/unload' });
    assertError(res, 404, { code: 'model_not_found' });
  });
});

describe('one memory limit across models', () => {
  let dirs;
  before(() => {
    dirs = modelsDir();
  });
  after(() => {
    fs.rmSync(dirs.root, { recursive: true, force: true });
  });

  // The pinned stories260K counts ~2.4 MiB (weights and KV cache), the directory's tiny ~1.8 MiB
  // before its load (1.1 MiB after), stories ~2.4 MiB.
  test('a load that does not fit unloads the idle model first', async () => {
    const daemon = await startDaemon({ args: ['--models-dir', dirs.dir, '--memory-limit', '5M'] });
    try {
      assert.equal((await complete(daemon, { model: 'tiny' })).status, 200);
      assert.equal((await complete(daemon, { model: 'stories' })).status, 200);
      const models = await listed(daemon);
      assert.equal(models.stories260K.loaded, true, 'the pinned model stays');
      assert.equal(models.stories260K.pinned, true);
      assert.equal(models.stories.loaded, true);
      assert.equal(models.tiny.loaded, false, 'the idle model made room');
      assert.match(daemon.output, /unloaded model 'tiny' to make room for 'stories'/);
      const metrics = (await request(daemon, { path: '/metrics' })).text;
      assert.match(metrics, /^ember_models_loaded 2$/m);
      assert.match(metrics, /^ember_models_memory_limit_bytes 5242880$/m);
      assert.match(metrics, /^ember_model_unloads_total\{reason="evicted"\} 1$/m);
      // No model named: the pinned one.
      const pinned = await complete(daemon, {});
      assert.equal(pinned.json.model, 'stories260K');
    } finally {
      await daemon.stop();
    }
  });

  test('a load that cannot fit beside models that stay is a 503 naming the need', async () => {
    const daemon = await startDaemon({ args: ['--models-dir', dirs.dir, '--memory-limit', '4M'] });
    try {
      const res = await complete(daemon, { model: 'tiny' });
      assertError(res, 503, { method: 'POST', template: '/v1/completions', param: 'model', code: 'insufficient_memory' });
      assert.match(res.json.error.message, /needs about [\d.]+ MiB and the memory limit is 4\.0 MiB/);
      assert.equal(res.headers['retry-after'], '5');
      assert.equal((await complete(daemon, {})).status, 200, 'the pinned model still answers');
    } finally {
      await daemon.stop();
    }
  });
});

describe('loading one model does not hold up another', () => {
  test('the pinned model answers while another loads slowly', async () => {
    const dirs = modelsDir();
    // Each load step waits 40 ms: tiny's load takes a while, the pinned model is already loaded.
    const daemon = await startDaemon({ args: ['--models-dir', dirs.dir], env: { EMBER_TEST_LOAD_DELAY_MS: '40' },
                                       readyTimeoutMs: 60_000 });
    try {
      const order = [];
      const slow = complete(daemon, { model: 'tiny' }).then((r) => {
        order.push('tiny');
        return r;
      });
      await until('tiny is loading', async () => (await listed(daemon)).tiny.loading);
      const quick = await complete(daemon, { model: 'stories260K' });
      order.push('stories260K');
      assert.equal(quick.status, 200);
      assert.equal((await slow).status, 200);
      assert.deepEqual(order, ['stories260K', 'tiny']);
    } finally {
      await daemon.stop();
      fs.rmSync(dirs.root, { recursive: true, force: true });
    }
  });
});
