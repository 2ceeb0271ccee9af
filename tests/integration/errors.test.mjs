// Hostile and wrong requests get the right status and an OpenAI error body (checked against
// api/openapi.yaml), and the daemon keeps answering /health afterwards. Also: API keys (401),
// the Host check (403) and a full queue (503 + Retry-After).
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { MODEL_ID, assertError } from './helpers/expect.mjs';
import { openStream, request } from './helpers/http.mjs';
import { assertResponse } from './helpers/schema.mjs';

// Runs one check and keeps its failure, so one run reports every case that fails.
function collect(failures, check) {
  try {
    check();
  } catch (e) {
    failures.push(e.message.split('\n')[0]);
  }
}

async function assertHealthy(daemon) {
  const res = await request(daemon, { path: '/health' });
  assert.equal(res.status, 200, `/health after the errors: ${res.status} ${res.text}`);
  assertResponse('GET', '/health', res);
  assert.equal(daemon.exit, null, 'the daemon is still running');
}

describe('invalid requests', () => {
  let daemon;
  before(async () => {
    daemon = await startDaemon();
  });
  after(async () => {
    await daemon?.stop();
  });
  const CHAT = '/v1/chat/completions';
  const COMPLETIONS = '/v1/completions';
  const post = (path, opts) => request(daemon, { method: 'POST', path, ...opts });
  const chatBody = { model: MODEL_ID, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 };

  test('malformed JSON is 400', async () => {
    for (const body of ['{"messages": [', 'not json at all', '', '{"messages": [{"role": "user", "content": "x"}]}}', '\u0000\u0001']) {
      const res = await post(CHAT, { body, headers: { 'Content-Type': 'application/json' } });
      const e = assertError(res, 400, { method: 'POST', template: CHAT });
      assert.equal(e.type, 'invalid_request_error');
    }
    const res = await post(COMPLETIONS, { body: '[1, 2, 3]', headers: { 'Content-Type': 'application/json' } });
    assertError(res, 400, { method: 'POST', template: COMPLETIONS });
    await assertHealthy(daemon);
  });

  test('a model the server does not serve is a 404 model_not_found, streamed or not; no model is the served one', async () => {
    for (const model of ['gpt-4o-not-here', `${MODEL_ID} `, '../stories260K', '/etc/passwd', '']) {
      for (const [path, body] of [[CHAT, chatBody], [COMPLETIONS, { prompt: 'Hi', max_tokens: 2 }]]) {
        for (const stream of [false, true]) {
          const res = await post(path, { json: { ...body, model, stream } });
          if (model === '') {
            assert.equal(res.status, 200, `model "" is the served model: ${res.status}`);
            continue;
          }
          const e = assertError(res, 404, { method: 'POST', template: path, param: 'model', code: 'model_not_found',
                                            what: `${path} model ${JSON.stringify(model)}` });
          assert.ok(e.message.includes(MODEL_ID), `the message names the served model: ${e.message}`);
        }
      }
    }
    const { model: _, ...noModel } = chatBody;
    assert.equal((await post(CHAT, { json: noModel })).status, 200);
    await assertHealthy(daemon);
  });

  test('wrong types are 400 naming the field', async () => {
    const cases = [
      [CHAT, { messages: 'Hi' }, 'messages'],
      [CHAT, { messages: [] }, 'messages'],
      [CHAT, { ...chatBody, max_tokens: '10' }, 'max_tokens'],
      [CHAT, { ...chatBody, max_tokens: 1.5 }, 'max_tokens'],
      [CHAT, { ...chatBody, temperature: 'hot' }, 'temperature'],
      [CHAT, { ...chatBody, stream: 'yes' }, 'stream'],
      [CHAT, { ...chatBody, seed: 'abc' }, 'seed'],
      [CHAT, { ...chatBody, model: 42 }, 'model'],
      [CHAT, { ...chatBody, stop: 42 }, 'stop'],
      [CHAT, { ...chatBody, logit_bias: [1, 2] }, 'logit_bias'],
      [CHAT, { ...chatBody, stream_options: 'yes' }, 'stream_options'],
      [COMPLETIONS, { prompt: 42 }, 'prompt'],
      [COMPLETIONS, { prompt: { text: 'x' } }, 'prompt'],
      [COMPLETIONS, {}, 'prompt'],
    ];
    const failures = [];
    for (const [path, json, param] of cases) {
      const res = await post(path, { json });
      collect(failures, () => assertError(res, 400, { method: 'POST', template: path, param, what: `${path} ${JSON.stringify(json)}` }));
    }
    assert.deepEqual(failures, [], 'every case is a 400 naming the field');
    // roles and content parts
    const role = await post(CHAT, { json: { messages: [{ role: 'wizard', content: 'x' }] } });
    assert.match(assertError(role, 400, { method: 'POST', template: CHAT }).param, /^messages/);
    const part = await post(CHAT, { json: { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: {} }] }] } });
    assert.match(assertError(part, 400, { method: 'POST', template: CHAT }).param, /^messages/);
    await assertHealthy(daemon);
  });

  test('out-of-range values are 400 naming the field', async () => {
    const cases = [
      [{ ...chatBody, max_tokens: 0 }, 'max_tokens'],
      [{ ...chatBody, max_tokens: -5 }, 'max_tokens'],
      [{ ...chatBody, max_tokens: 1e12 }, 'max_tokens'],
      [{ ...chatBody, max_tokens: 100000 }, 'max_tokens'],  // beyond the context window
      [{ ...chatBody, temperature: -1 }, 'temperature'],
      [{ ...chatBody, top_p: 2 }, 'top_p'],
      [{ ...chatBody, n: 17 }, 'n'],
      [{ ...chatBody, seed: 1e30 }, 'seed'],
    ];
    const failures = [];
    for (const [json, param] of cases) {
      const res = await post(CHAT, { json });
      collect(failures, () => assertError(res, 400, { method: 'POST', template: CHAT, param, what: JSON.stringify(json) }));
    }
    // a prompt longer than the context window
    const long = await post(COMPLETIONS, { json: { prompt: 'the cat sat on the mat '.repeat(2000), max_tokens: 4 } });
    collect(failures, () => assertError(long, 400, { method: 'POST', template: COMPLETIONS, param: 'prompt', what: 'a prompt longer than the context' }));
    assert.deepEqual(failures, [], 'every case is a 400 naming the field');
    await assertHealthy(daemon);
  });

  test('a body over the limit is 413', async () => {
    // Only the head is sent: its Content-Length alone is over the limit, so the answer must come
    // before any body byte. (Sending the whole body races with the server closing the connection
    // after its 413: the client may see EPIPE/ECONNRESET instead of the answer.)
    const http = await import('node:http');
    const res = await new Promise((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1',
        port: daemon.port,
        method: 'POST',
        path: COMPLETIONS,
        headers: { 'Content-Type': 'application/json', 'Content-Length': String((1 << 20) + 100) },
      });
      req.on('response', (r) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (d) => (text += d));
        r.on('end', () => {
          req.destroy();
          let json;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: r.statusCode, headers: r.headers, text, json });
        });
      });
      req.on('error', reject);
      req.setTimeout(5000, () => req.destroy(new Error('no answer to an oversized Content-Length within 5 s')));
      req.flushHeaders();
    });
    assertError(res, 413, { method: 'POST', template: COMPLETIONS });
    await assertHealthy(daemon);
  });

  test('headers over the limit are 431', async () => {
    const res = await request(daemon, { path: '/v1/models', headers: { 'X-Padding': 'x'.repeat(32 * 1024) } });
    assertError(res, 431, { method: 'POST', template: COMPLETIONS });
    await assertHealthy(daemon);
  });

  test('unknown paths are 404, wrong methods 405 with Allow', async () => {
    assertError(await request(daemon, { path: '/v2/nothing' }), 404);
    const r405 = await request(daemon, { path: CHAT });
    // 405 answers are documented under the operation the path does have
    assertError(r405, 405, { method: 'POST', template: CHAT });
    assert.equal(r405.headers.allow, 'POST');
    const h405 = await request(daemon, { method: 'POST', path: '/health', json: {} });
    assertError(h405, 405, { method: 'GET', template: '/health' });
    assert.equal(h405.headers.allow, 'GET');
    await assertHealthy(daemon);
  });

  test('garbage instead of HTTP gets a 400 or a closed connection, and the daemon lives on', async () => {
    const answer = await new Promise((resolve) => {
      const sock = net.connect(daemon.port, '127.0.0.1', () => sock.end('HELLO \x00\x01\x02 nonsense\r\n\r\n'));
      let data = '';
      sock.on('data', (d) => (data += d));
      sock.on('close', () => resolve(data));
      sock.on('error', () => resolve(data));
      sock.setTimeout(5000, () => sock.destroy());
    });
    assert.ok(answer === '' || /^HTTP\/1\.1 400/.test(answer), `answer: ${answer.slice(0, 200)}`);
    await assertHealthy(daemon);
  });

  test('a Host header that is not loopback is 403 (DNS rebinding); loopback names are fine', async () => {
    const evil = await request(daemon, { path: '/v1/models', headers: { Host: 'attacker.example.com' } });
    assertError(evil, 403, { method: 'GET', template: '/v1/models' });
    for (const host of ['localhost', `localhost:${daemon.port}`, `127.0.0.1:${daemon.port}`, '[::1]']) {
      const ok = await request(daemon, { path: '/v1/models', headers: { Host: host } });
      assert.equal(ok.status, 200, `Host ${host}: ${ok.text}`);
    }
    await assertHealthy(daemon);
  });
});

describe('API keys', () => {
  let daemon;
  const KEY = 'test-key-0123456789';
  before(async () => {
    daemon = await startDaemon({ args: ['--api-key', KEY] });
  });
  after(async () => {
    await daemon?.stop();
  });

  test('a missing or wrong key is 401 with the error shape; /health stays public', async () => {
    const none = await request(daemon, { path: '/v1/models' });
    assertError(none, 401, { method: 'GET', template: '/v1/models' });
    assert.match(none.headers['www-authenticate'] || '', /^Bearer/i);
    for (const headers of [{ Authorization: 'Bearer wrong' }, { Authorization: `Basic ${KEY}` }, { 'X-Api-Key': 'wrong' }, { Authorization: `Bearer ${KEY}x` }]) {
      const res = await request(daemon, {
        method: 'POST',
        path: '/v1/chat/completions',
        headers,
        json: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 },
      });
      assertError(res, 401, { method: 'POST', template: '/v1/chat/completions' });
    }
    for (const path of ['/metrics', '/v1/models/stories260K']) {
      assert.equal((await request(daemon, { path })).status, 401, `${path} needs the key`);
    }
    const tok = await request(daemon, { method: 'POST', path: '/tokenize', json: { content: 'x' } });
    assert.equal(tok.status, 401, '/tokenize needs the key');
    await assertHealthy(daemon);
  });

  test('the openai package: a wrong key is an AuthenticationError, the right one works', async () => {
    const { default: OpenAI } = await import('openai');
    const wrong = new OpenAI({ baseURL: `${daemon.baseUrl}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (err) => {
      assert.ok(err instanceof OpenAI.AuthenticationError, `AuthenticationError, got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 401);
      return true;
    });
    const right = new OpenAI({ baseURL: `${daemon.baseUrl}/v1`, apiKey: KEY, maxRetries: 0 });
    const r = await right.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, model: 'stories260K' });
    assert.equal(r.object, 'chat.completion');
  });

  test('the right key works as Bearer and as X-Api-Key', async () => {
    const bearer = await request(daemon, { path: '/v1/models', headers: { Authorization: `Bearer ${KEY}` } });
    assert.equal(bearer.status, 200, bearer.text);
    assertResponse('GET', '/v1/models', bearer);
    const header = await request(daemon, {
      method: 'POST',
      path: '/v1/completions',
      headers: { 'X-Api-Key': KEY },
      json: { prompt: 'Once', max_tokens: 3 },
    });
    assert.equal(header.status, 200, header.text);
    assertResponse('POST', '/v1/completions', header);
  });
});

describe('a full queue', () => {
  let daemon;
  before(async () => {
    daemon = await startDaemon({ args: ['--queue', '1', '--parallel', '1', '-c', '4096'] });
  });
  after(async () => {
    await daemon?.stop();
  });

  test('requests beyond one running and one queued get 503 with Retry-After', async () => {
    const body = { prompt: 'Once upon a time', max_tokens: 4000, temperature: 0, stream: true };
    // The first one is running (its first event arrived) before the others are fired together:
    // the next to arrive waits in the queue, the rest overflow. (Firing all six at once raced: when
    // the first still sat in the queue, only it was accepted and the queue had room again later.)
    const first = await openStream(daemon, { path: '/v1/completions', json: body });
    assert.equal(first.status, 200);
    await first.events().next();
    const others = await Promise.all(Array.from({ length: 5 }, () => openStream(daemon, { path: '/v1/completions', json: body })));
    const answers = [first, ...others];
    try {
      const accepted = answers.filter((a) => a.status === 200);
      const rejected = answers.filter((a) => a.status !== 200);
      assert.equal(accepted.length, 2, `one running and one queued: ${answers.map((a) => a.status)}`);
      assert.equal(rejected.length, 4);
      for (const r of rejected) {
        assertError(r, 503, { method: 'POST', template: '/v1/completions' });
        assert.match(r.headers['retry-after'] || '', /^\d+$/, `Retry-After: ${r.headers['retry-after']}`);
      }
      // A non-streamed request is refused the same way.
      const plain = await request(daemon, { method: 'POST', path: '/v1/completions', json: { ...body, stream: false } });
      assertError(plain, 503, { method: 'POST', template: '/v1/completions' });
      await assertHealthy(daemon);
    } finally {
      for (const a of answers) a.destroy?.();
    }
    // Once the clients are gone the daemon serves again.
    const deadline = Date.now() + 5000;
    let res;
    do {
      res = await request(daemon, { method: 'POST', path: '/v1/completions', json: { prompt: 'Once', max_tokens: 4 } });
      if (res.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    } while (Date.now() < deadline);
    assert.equal(res.status, 200, `served again after the streams were dropped: ${res.text}`);
  });
});

describe('CORS', () => {
  const ORIGIN = 'http://localhost:3000';
  const KEY = 'cors-test-key';
  let daemon;
  let plain;
  before(async () => {
    daemon = await startDaemon({ args: ['--cors-origin', ORIGIN, '--api-key', KEY] });
    plain = await startDaemon();
  });
  after(async () => {
    await daemon?.stop();
    await plain?.stop();
  });
  const preflight = (target, origin) =>
    request(target, {
      method: 'OPTIONS',
      path: '/v1/chat/completions',
      headers: { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' },
    });

  test('off by default: pages from other origins are refused, preflights too', async () => {
    const res = await request(plain, { path: '/v1/models', headers: { Origin: ORIGIN } });
    assertError(res, 403, { method: 'GET', template: '/v1/models' });
    assert.equal(res.headers['access-control-allow-origin'], undefined);
    // A "simple" cross-origin POST (text/plain: no preflight) must not start a generation.
    const simple = await request(plain, {
      method: 'POST',
      path: '/v1/completions',
      headers: { Origin: 'http://evil.example', 'Content-Type': 'text/plain' },
      body: JSON.stringify({ prompt: 'Once', max_tokens: 2 }),
    });
    assert.equal(simple.status, 403, simple.text);
    const pre = await preflight(plain, ORIGIN);
    assert.ok(pre.status >= 400, `preflight with CORS off: ${pre.status}`);
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
  });

  test('a configured origin: the preflight is answered before the key check, requests get the header', async () => {
    const pre = await preflight(daemon, ORIGIN);
    assert.ok(pre.status === 200 || pre.status === 204, `preflight: ${pre.status} ${pre.text}`);
    assert.equal(pre.headers['access-control-allow-origin'], ORIGIN);
    assert.match(pre.headers['access-control-allow-methods'] || '', /POST/);
    assert.match((pre.headers['access-control-allow-headers'] || '').toLowerCase(), /authorization/);

    const res = await request(daemon, {
      method: 'POST',
      path: '/v1/completions',
      headers: { Origin: ORIGIN, Authorization: `Bearer ${KEY}` },
      json: { prompt: 'Once', max_tokens: 2 },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.headers['access-control-allow-origin'], ORIGIN);
    // only the preflight is exempt from the key
    const denied = await request(daemon, { path: '/v1/models', headers: { Origin: ORIGIN } });
    assertError(denied, 401, { method: 'GET', template: '/v1/models' });

    const other = await preflight(daemon, 'http://evil.example');
    assert.ok(other.status >= 400, `preflight from another origin: ${other.status}`);
    assert.equal(other.headers['access-control-allow-origin'], undefined);
  });
});
