// A client that goes away mid-stream frees the engine: the generation is cancelled (visible in
// /metrics), nothing stays active, and the next request is served at once.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { assertCleanStream } from './helpers/expect.mjs';
import { collectStream, openStream, request } from './helpers/http.mjs';
import { assertResponse } from './helpers/schema.mjs';

let daemon;
before(async () => {
  // A 4096-token context lets one request run for seconds even on this tiny model.
  daemon = await startDaemon({ args: ['-c', '4096'] });
});
after(async () => {
  await daemon?.stop();
});

// The value of an unlabelled sample in Prometheus text.
function sample(text, name) {
  const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  assert.ok(m, `/metrics has ${name}:\n${text}`);
  return Number(m[1]);
}

async function metrics() {
  const res = await request(daemon, { path: '/metrics' });
  assert.equal(res.status, 200, res.text);
  assertResponse('GET', '/metrics', res);
  return res.text;
}

const LONG = { prompt: 'Once upon a time', max_tokens: 4000, temperature: 0 };

for (const [name, path, body] of [
  ['completion', '/v1/completions', LONG],
  ['chat', '/v1/chat/completions', { messages: [{ role: 'user', content: 'Tell me a long story.' }], max_tokens: 4000, temperature: 0 }],
]) {
  test(`a ${name} client that disconnects mid-stream is cancelled and frees the engine`, async () => {
    const before = await metrics();
    const cancelledBefore = sample(before, 'ember_jobs_cancelled_total');
    const generatedBefore = sample(before, 'ember_generated_tokens_total');

    const s = await openStream(daemon, { path, json: { ...body, stream: true } });
    assert.equal(s.status, 200, s.text);
    let contentEvents = 0;
    for await (const e of s.events()) {
      if (e.json?.choices?.[0]?.text || e.json?.choices?.[0]?.delta?.content) contentEvents++;
      if (contentEvents >= 3) break;
    }
    assert.equal(contentEvents, 3, 'the stream was producing text');
    s.destroy();

    // Within a short time: one more cancelled job, no active job, and far fewer tokens than asked.
    const deadline = Date.now() + 3000;
    let text;
    for (;;) {
      text = await metrics();
      const done = sample(text, 'ember_jobs_cancelled_total') > cancelledBefore && sample(text, 'ember_active_requests') === 0;
      if (done || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.equal(sample(text, 'ember_jobs_cancelled_total'), cancelledBefore + 1, 'the generation was cancelled');
    assert.equal(sample(text, 'ember_active_requests'), 0, 'no generation is running');
    assert.equal(sample(text, 'ember_queue_depth'), 0, 'none is waiting');
    const generated = sample(text, 'ember_generated_tokens_total') - generatedBefore;
    assert.ok(generated < 4000, `the generation stopped early (${generated} of 4000 tokens)`);

    // The engine is free: a short request is answered quickly.
    const t0 = Date.now();
    const next = await collectStream(daemon, { path: '/v1/completions', json: { prompt: 'The dog', max_tokens: 8, temperature: 0, stream: true } });
    assertCleanStream(next, '/v1/completions');
    assert.ok(Date.now() - t0 < 1500, `the next request took ${Date.now() - t0} ms`);
  });
}

test('a non-streaming client that disconnects is cancelled too', async () => {
  const before = sample(await metrics(), 'ember_jobs_cancelled_total');
  const http = await import('node:http');
  await new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port: daemon.port, method: 'POST', path: '/v1/completions', headers: { 'Content-Type': 'application/json' } });
    req.on('error', () => resolve());
    req.end(JSON.stringify(LONG));
    setTimeout(() => {
      req.destroy();
      resolve();
    }, 150);
  });
  const deadline = Date.now() + 3000;
  let text;
  do {
    await new Promise((r) => setTimeout(r, 25));
    text = await metrics();
  } while (Date.now() < deadline && !(sample(text, 'ember_jobs_cancelled_total') > before && sample(text, 'ember_active_requests') === 0));
  assert.equal(sample(text, 'ember_jobs_cancelled_total'), before + 1, 'the generation was cancelled');
  assert.equal(sample(text, 'ember_active_requests'), 0);
});
