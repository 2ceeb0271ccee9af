// SIGTERM while a stream runs: the stream ends cleanly (its finish chunk, or a final error event,
// then [DONE] and the end of the chunked body) and the process exits 0.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { openStream, request } from './helpers/http.mjs';
import { assertStreamEvent } from './helpers/schema.mjs';

async function sigtermDuringStream(path, body, { args = [], expectError = false } = {}) {
  const daemon = await startDaemon({ args: ['-c', '4096', ...args] });
  try {
    const s = await openStream(daemon, { path, json: { ...body, stream: true } });
    assert.equal(s.status, 200, s.text);
    const events = [];
    let signalled = false;
    let readError = null;
    try {
      for await (const e of s.events()) {
        if (e.data === null) continue;  // keep-alive comments
        events.push(e);
        const content = e.json?.choices?.[0]?.text || e.json?.choices?.[0]?.delta?.content;
        if (content && !signalled) {
          signalled = true;
          daemon.child.kill('SIGTERM');
        }
      }
    } catch (e) {
      readError = e;
    }
    assert.ok(signalled, 'the stream produced text before it ended');
    assert.equal(readError, null, `the stream was cut off (${readError?.code ?? readError?.message}) after ${events.length} events; last: ${events.at(-1)?.raw}`);
    assert.ok(s.complete, 'the HTTP response ended with its last chunk, not a reset');
    assert.equal(events.at(-1).data, '[DONE]', `the stream ends with [DONE]; last event: ${events.at(-1)?.raw}`);
    const before = events.at(-2);
    assert.ok(before?.json, `an event before [DONE]: ${before?.raw}`);
    assertStreamEvent(path, before.json);
    if (expectError) assert.ok(before.json.error, `the stream ends with an error event: ${before.raw}`);
    if (before.json.error) {
      assert.equal(typeof before.json.error.message, 'string');
    } else {
      assert.ok(['stop', 'length'].includes(before.json.choices[0]?.finish_reason), `a finish chunk: ${before.raw}`);
    }
    for (const e of events.slice(0, -1)) assertStreamEvent(path, e.json);

    const timer = setTimeout(() => daemon.child.kill('SIGKILL'), 20_000);
    const exit = await daemon.exited;
    clearTimeout(timer);
    assert.deepEqual(exit, { code: 0, signal: null }, `the daemon exits 0\n${daemon.describe()}`);
  } finally {
    await daemon.stop('SIGKILL');
  }
}

test('SIGTERM during a completion stream: the stream ends cleanly and the daemon exits 0', async () => {
  await sigtermDuringStream('/v1/completions', { prompt: 'Once upon a time', max_tokens: 4000, temperature: 0 });
});

test('SIGTERM during a chat stream: the stream ends cleanly and the daemon exits 0', async () => {
  await sigtermDuringStream('/v1/chat/completions', {
    messages: [{ role: 'user', content: 'Tell me a very long story.' }],
    max_tokens: 4000,
    temperature: 0,
  });
});

test('SIGTERM with --shutdown-grace 0: the running stream ends with an error event, then [DONE]; exit 0', async () => {
  await sigtermDuringStream(
    '/v1/chat/completions',
    { messages: [{ role: 'user', content: 'Tell me a very long story.' }], max_tokens: 4000, temperature: 0 },
    { args: ['--shutdown-grace', '0'], expectError: true },
  );
});

test('SIGTERM and SIGINT on an idle daemon: exit 0, and no new connections afterwards', async () => {
  for (const signal of ['SIGTERM', 'SIGINT']) {
    const daemon = await startDaemon();
    const exit = await daemon.stop(signal);
    assert.deepEqual(exit, { code: 0, signal: null }, `${signal}: exit 0\n${daemon.describe()}`);
    await assert.rejects(request(daemon, { path: '/health', timeoutMs: 2000 }), /ECONNREFUSED|ECONNRESET|socket hang up/);
  }
});
