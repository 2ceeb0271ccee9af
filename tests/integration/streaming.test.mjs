// Server-sent events for chat and completions: chunk order, the role in the first chat delta,
// content deltas, the finish chunk, the usage chunk with stream_options.include_usage, [DONE].
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { MODEL_ID, assertCleanStream } from './helpers/expect.mjs';
import { collectStream, request } from './helpers/http.mjs';
import { assertResponse } from './helpers/schema.mjs';

let daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  await daemon?.stop();
});

const CHAT = '/v1/chat/completions';
const COMPLETIONS = '/v1/completions';
const messages = [
  { role: 'system', content: 'You are a storyteller.' },
  { role: 'user', content: 'Tell me a story about a bird.' },
];

async function nonStreamed(path, body) {
  const res = await request(daemon, { method: 'POST', path, json: body });
  assert.equal(res.status, 200, res.text);
  assertResponse('POST', path, res);
  return res.json;
}

// usage's counts, without the cached prefix: a second request reuses the first one's prompt.
const counts = ({ prompt_tokens, completion_tokens, total_tokens }) => ({ prompt_tokens, completion_tokens, total_tokens });

test('chat stream: role first, content deltas, finish chunk, [DONE]; same text as non-streamed', async () => {
  const body = { model: MODEL_ID, messages, max_tokens: 40, temperature: 0 };
  const s = await collectStream(daemon, { path: CHAT, json: { ...body, stream: true } });
  const { text, finishReason, chunks } = assertCleanStream(s, CHAT);
  assert.equal(s.headers['cache-control'], 'no-cache');
  const contentChunks = chunks.filter((c) => c.json.choices[0]?.delta?.content);
  assert.ok(contentChunks.length >= 2, 'the text arrives in several content deltas');
  const plain = await nonStreamed(CHAT, body);
  assert.equal(text, plain.choices[0].message.content);
  assert.equal(finishReason, plain.choices[0].finish_reason);
  assert.equal(chunks[0].json.model, MODEL_ID);
});

test('chat stream with include_usage: a usage chunk with empty choices before [DONE]', async () => {
  const body = { messages, max_tokens: 30, temperature: 0 };
  const s = await collectStream(daemon, { path: CHAT, json: { ...body, stream: true, stream_options: { include_usage: true } } });
  const { text, usage } = assertCleanStream(s, CHAT, { includeUsage: true });
  const plain = await nonStreamed(CHAT, body);
  assert.equal(text, plain.choices[0].message.content);
  assert.deepEqual(counts(usage), counts(plain.usage), 'the usage chunk counts what the non-streamed answer counts');
});

test('completion stream: text chunks, finish chunk, [DONE]; with and without include_usage', async () => {
  const body = { prompt: 'Once upon a time', max_tokens: 25, temperature: 0 };
  const plain = await nonStreamed(COMPLETIONS, body);

  const s = await collectStream(daemon, { path: COMPLETIONS, json: { ...body, stream: true } });
  const a = assertCleanStream(s, COMPLETIONS);
  assert.equal(a.text, plain.choices[0].text);
  assert.equal(a.finishReason, 'length');

  const u = await collectStream(daemon, {
    path: COMPLETIONS,
    json: { ...body, stream: true, stream_options: { include_usage: true } },
  });
  const b = assertCleanStream(u, COMPLETIONS, { includeUsage: true });
  assert.equal(b.text, plain.choices[0].text);
  assert.deepEqual(counts(b.usage), counts(plain.usage));
  assert.equal(b.usage.completion_tokens, 25);

  // include_usage false is the same as absent
  const f = await collectStream(daemon, {
    path: COMPLETIONS,
    json: { ...body, stream: true, stream_options: { include_usage: false } },
  });
  assert.equal(assertCleanStream(f, COMPLETIONS).text, plain.choices[0].text);
});

test('several streams one after another on one keep-alive connection', async () => {
  const http = await import('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const sockets = new Set();
    for (let i = 0; i < 3; i++) {
      const s = await collectStream(
        { port: daemon.port },
        { path: COMPLETIONS, json: { prompt: 'The cat', max_tokens: 5, temperature: 0, stream: true }, agent },
      );
      assertCleanStream(s, COMPLETIONS);
      sockets.add(s.localPort);
    }
    assert.equal(sockets.size, 1, 'the connection is reused after each stream');
  } finally {
    agent.destroy();
  }
});
