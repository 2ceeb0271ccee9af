// /v1/completions with several prompts, and `echo` (with logprobs and max_tokens 0: scoring a
// text, as evaluation harnesses do), through the `openai` package.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { daemonWithClient } from './helpers/daemon.mjs';
import { MODEL_ID } from './helpers/expect.mjs';
import { request } from './helpers/http.mjs';
import { assertSchema } from './helpers/schema.mjs';

const ctx = daemonWithClient(OpenAI);

const complete = (body) => ctx.client.completions.create({ model: MODEL_ID, ...body });
const tokenize = async (content, add_special) => {
  const r = await request(ctx.daemon, { method: 'POST', path: '/tokenize', json: { content, add_special } });
  assert.equal(r.status, 200, r.text);
  return r.json.tokens;
};

test('several prompts: n choices each, prompt-major, each as its own request would give', async () => {
  const prompts = ['Once upon a time', 'The little dog', 'Once upon a hill'];
  const r = await complete({ prompt: prompts, n: 2, seed: 11, max_tokens: 8 });
  assertSchema('Completion', r);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3, 4, 5]);
  let promptTokens = 0;
  for (const [p, prompt] of prompts.entries()) {
    const alone = await complete({ prompt, n: 2, seed: 11, max_tokens: 8 });
    promptTokens += alone.usage.prompt_tokens;
    assert.deepEqual(r.choices.slice(2 * p, 2 * p + 2).map((c) => c.text), alone.choices.map((c) => c.text), prompt);
  }
  assert.equal(r.usage.prompt_tokens, promptTokens);
  // Token-id prompts too; streamed, every chunk names its choice.
  const ids = [await tokenize('Once upon a time', true), await tokenize('The little dog', true)];
  const stream = await complete({ prompt: ids, seed: 11, max_tokens: 8, n: 2, stream: true });
  const streamed = ['', '', '', ''];
  for await (const chunk of stream) {
    assertSchema('CompletionChunk', chunk);
    for (const c of chunk.choices) streamed[c.index] += c.text;
  }
  assert.deepEqual(streamed, r.choices.slice(0, 4).map((c) => c.text));
  await assert.rejects(complete({ prompt: ['a', 'b', 'c', 'd', 'e'], n: 4, max_tokens: 2 }),
    (e) => e.status === 400 && e.param === 'n');
  await assert.rejects(complete({ prompt: ['a', [1, 2]], max_tokens: 2 }), (e) => e.status === 400 && e.param === 'prompt');
});

test('echo: the text starts with the prompt, streamed or not', async () => {
  const prompt = 'Once upon a time';
  const r = await complete({ prompt, echo: true, seed: 5, max_tokens: 6 });
  assertSchema('Completion', r);
  const plain = await complete({ prompt, seed: 5, max_tokens: 6 });
  assert.equal(r.choices[0].text, prompt + plain.choices[0].text);
  const stream = await complete({ prompt, echo: true, seed: 5, max_tokens: 6, stream: true });
  const pieces = [];
  for await (const chunk of stream) pieces.push(chunk.choices[0]?.text ?? '');
  assert.equal(pieces[0], prompt, 'the echoed prompt is the first chunk');
  assert.equal(pieces.join(''), r.choices[0].text);
  await assert.rejects(
    ctx.client.chat.completions.create({ model: MODEL_ID, messages: [{ role: 'user', content: 'hi' }], echo: true }),
    (e) => e.status === 400 && e.param === 'echo',
  );
});

test('echo + logprobs + max_tokens 0 scores a text; the scores match what generation reported', async () => {
  // Generate greedily with logprobs, then score prompt + generated tokens as token ids.
  const promptIds = await tokenize('Once upon a time', true);
  const gen = await complete({ prompt: [promptIds], temperature: 0, max_tokens: 6, logprobs: 2 });
  const genIds = await tokenize(gen.choices[0].text, false);
  const scored = await complete({ prompt: [...promptIds, ...genIds], echo: true, max_tokens: 0, logprobs: 2 });
  assertSchema('Completion', scored);
  const lp = scored.choices[0].logprobs;
  assert.equal(scored.choices[0].finish_reason, 'length');
  assert.equal(scored.usage.completion_tokens, 0);
  assert.equal(lp.tokens.length, promptIds.length + genIds.length);
  assert.equal(lp.token_logprobs[0], null, 'nothing predicts the first token');
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < lp.tokens.length; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const best = Math.max(...Object.values(lp.top_logprobs[i]));
    assert.ok(best >= lp.token_logprobs[i] - 1e-5, `top-1 >= the token's own at ${i}`);
  }
  // Where the detokenized text re-tokenizes to the same ids, the scores are generation's own.
  const genLp = gen.choices[0].logprobs.token_logprobs;
  if (genIds.length === genLp.length) {
    const tail = lp.token_logprobs.slice(promptIds.length);
    for (let i = 0; i < tail.length; ++i) assert.ok(Math.abs(tail[i] - genLp[i]) < 1e-2, `token ${i}: ${tail[i]} vs ${genLp[i]}`);
  }
  // A text prompt: the BOS the server adds is not listed, so the first listed token has a score.
  const text = await complete({ prompt: 'Once upon a time', echo: true, max_tokens: 0, logprobs: 0 });
  assert.equal(text.choices[0].text, 'Once upon a time');
  assert.equal(text.choices[0].logprobs.tokens.length, promptIds.length - 1);
  assert.ok(text.choices[0].logprobs.token_logprobs.every((v) => v !== null && v <= 0));
  await assert.rejects(complete({ prompt: 'x', max_tokens: 0 }), (e) => e.status === 400 && e.param === 'max_tokens');
});
