// n > 1 (several choices from one prompt, evaluated once) and usage.prompt_tokens_details.cached_tokens,
// through the `openai` package.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { daemonWithClient } from './helpers/daemon.mjs';
import { MODEL_ID } from './helpers/expect.mjs';
import { assertSchema } from './helpers/schema.mjs';

const ctx = daemonWithClient(OpenAI);

const messages = [{ role: 'user', content: 'Tell me a story about a fox.' }];

test('n: 3 with a seed: three numbered choices, the same again for the same seed, streamed alike', async () => {
  const ask = () => ctx.client.chat.completions.create({ model: MODEL_ID, messages, n: 3, seed: 42, max_tokens: 12 });
  const a = await ask();
  assertSchema('ChatCompletion', a);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
  const texts = a.choices.map((c) => c.message.content);
  assert.ok(new Set(texts).size > 1, `choices differ: ${JSON.stringify(texts)}`);
  assert.ok(a.usage.completion_tokens <= 36 && a.usage.completion_tokens >= 3);
  const b = await ask();
  assert.deepEqual(b.choices.map((c) => c.message.content), texts);

  const stream = await ctx.client.chat.completions.create({
    model: MODEL_ID,
    messages,
    n: 3,
    seed: 42,
    max_tokens: 12,
    stream: true,
    stream_options: { include_usage: true },
  });
  const streamed = ['', '', ''];
  const finishes = [];
  let usage;
  for await (const chunk of stream) {
    assertSchema('ChatCompletionChunk', chunk);
    const c = chunk.choices[0];
    if (c) {
      streamed[c.index] += c.delta?.content ?? '';
      if (c.finish_reason) finishes[c.index] = c.finish_reason;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.deepEqual(streamed, texts);
  assert.equal(finishes.length, 3);
  assert.equal(usage.completion_tokens, a.usage.completion_tokens);
});

test('n on completions; out of range is a 400 naming n', async () => {
  const r = await ctx.client.completions.create({ model: MODEL_ID, prompt: 'Once upon a time', n: 2, seed: 3, max_tokens: 8 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  await assert.rejects(
    ctx.client.completions.create({ model: MODEL_ID, prompt: 'x', n: 17, max_tokens: 2 }),
    (e) => e.status === 400 && e.param === 'n',
  );
});

test('usage.prompt_tokens_details.cached_tokens: a repeated prompt reuses its prefix', async () => {
  const long = [{ role: 'user', content: 'The little fox ran through the forest looking for berries and a friend. '.repeat(4) }];
  const first = await ctx.client.chat.completions.create({ model: MODEL_ID, messages: long, max_tokens: 4, seed: 1 });
  const again = await ctx.client.chat.completions.create({ model: MODEL_ID, messages: long, max_tokens: 4, seed: 1 });
  assertSchema('ChatCompletion', again);
  assert.ok(first.usage.prompt_tokens_details.cached_tokens < first.usage.prompt_tokens);
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens - 1);
});
