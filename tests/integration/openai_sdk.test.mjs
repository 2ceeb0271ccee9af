// The official `openai` npm package pointed at the daemon: what users of OpenAI client libraries
// do. Non-streamed and streamed chat, legacy completions, models, and an error.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { startDaemon } from './helpers/daemon.mjs';
import { MODEL_ID } from './helpers/expect.mjs';
import { assertSchema, assertStreamEvent } from './helpers/schema.mjs';

let daemon;
let client;
before(async () => {
  daemon = await startDaemon();
  client = new OpenAI({ baseURL: `${daemon.baseUrl}/v1`, apiKey: 'not-needed', maxRetries: 0, timeout: 30_000 });
});
after(async () => {
  await daemon?.stop();
});

const messages = [
  { role: 'developer', content: 'You tell short stories.' },
  { role: 'user', content: 'Tell me about a fox.' },
];

test('models.list and models.retrieve', async () => {
  const page = await client.models.list();
  const ids = [];
  for await (const m of page) {
    assertSchema('Model', m);
    ids.push(m.id);
  }
  assert.deepEqual(ids, [MODEL_ID]);
  const m = await client.models.retrieve(MODEL_ID);
  assert.equal(m.id, MODEL_ID);
});

test('chat.completions.create, non-streamed', async () => {
  const r = await client.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 32, temperature: 0, seed: 7 });
  assertSchema('ChatCompletion', r);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(r.choices[0].message.content.length > 0, 'some text');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

async function streamChat(body) {
  const stream = await client.chat.completions.create({ ...body, stream: true });
  const out = { text: '', role: undefined, finish: undefined, usage: undefined, chunks: 0 };
  for await (const chunk of stream) {
    assertStreamEvent('/v1/chat/completions', chunk);
    out.chunks++;
    const choice = chunk.choices[0];
    if (choice) {
      out.role ??= choice.delta.role;
      out.text += choice.delta.content ?? '';
      if (choice.finish_reason) out.finish = choice.finish_reason;
    }
    if (chunk.usage) out.usage = chunk.usage;
  }
  return out;
}

test('chat.completions.create, streamed: same text as non-streamed', async () => {
  const body = { model: MODEL_ID, messages, max_tokens: 32, temperature: 0 };
  const plain = await client.chat.completions.create(body);
  const s = await streamChat(body);
  assert.ok(s.chunks >= 3, `several chunks (${s.chunks})`);
  assert.equal(s.role, 'assistant');
  assert.equal(s.text, plain.choices[0].message.content);
  assert.equal(s.finish, plain.choices[0].finish_reason);
  assert.equal(s.usage, undefined, 'no usage without stream_options.include_usage');
});

test('chat.completions.create, streamed with stream_options.include_usage', async () => {
  const body = { model: MODEL_ID, messages, max_tokens: 32, temperature: 0 };
  const plain = await client.chat.completions.create(body);
  const s = await streamChat({ ...body, stream_options: { include_usage: true } });
  assert.equal(s.text, plain.choices[0].message.content);
  assert.deepEqual(s.usage, plain.usage);
});

test('the SDK stream helper accumulates the same message', async () => {
  const body = { model: MODEL_ID, messages, max_tokens: 20, temperature: 0 };
  const plain = await client.chat.completions.create(body);
  const runner = client.chat.completions.stream(body);
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, plain.choices[0].message.content);
});

test('completions.create (legacy endpoint), streamed and not', async () => {
  const r = await client.completions.create({ model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
  assertSchema('Completion', r);
  assert.equal(r.usage.completion_tokens, 16);
  const stream = await client.completions.create({ model: MODEL_ID, prompt: 'Once upon a time', max_tokens: 16, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of stream) {
    assertStreamEvent('/v1/completions', chunk);
    text += chunk.choices[0]?.text ?? '';
  }
  assert.equal(text, r.choices[0].text);
});

test('a bad parameter is an openai.BadRequestError (400) naming the field', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: MODEL_ID, messages, temperature: 7 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `BadRequestError, got ${err?.constructor?.name}: ${err?.message}`);
      assert.equal(err.status, 400);
      assert.equal(err.param, 'temperature');
      assert.equal(err.type, 'invalid_request_error');
      assertSchema('Error', { error: err.error });
      return true;
    },
  );
  await assert.rejects(client.chat.completions.create({ model: MODEL_ID, messages: [] }), OpenAI.BadRequestError);
  await assert.rejects(client.models.retrieve('no-such-model'), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, `NotFoundError, got ${err?.constructor?.name}`);
    assert.equal(err.status, 404);
    return true;
  });
  // the daemon keeps serving
  const r = await client.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 4 });
  assert.ok(r.choices[0].message.content !== undefined);
});
