// Non-streamed requests over real HTTP: health and models, greedy completions against `ember run`,
// chat, stop sequences, sampling fields, /tokenize and /detokenize. Every JSON answer is checked
// against api/openapi.yaml.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { MODEL_ID, assertCleanStream, assertError, emberRunGreedy } from './helpers/expect.mjs';
import { collectStream, request } from './helpers/http.mjs';
import { assertResponse } from './helpers/schema.mjs';

let daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  const exit = await daemon?.stop();
  assert.deepEqual(exit, { code: 0, signal: null }, 'the daemon exits 0 on SIGTERM');
});

const post = (path, json) => request(daemon, { method: 'POST', path, json });

async function complete(body) {
  const res = await post('/v1/completions', body);
  assert.equal(res.status, 200, res.text);
  assertResponse('POST', '/v1/completions', res);
  return res.json;
}

async function chat(body) {
  const res = await post('/v1/chat/completions', body);
  assert.equal(res.status, 200, res.text);
  assertResponse('POST', '/v1/chat/completions', res);
  return res.json;
}

test('GET /health is 200 {"status":"ok"}', async () => {
  const res = await request(daemon, { path: '/health' });
  assertResponse('GET', '/health', res);
  assert.equal(res.status, 200);
  assert.equal(res.json.status, 'ok');
});

test('GET /v1/models and /v1/models/{id}', async () => {
  const list = await request(daemon, { path: '/v1/models' });
  assert.equal(list.status, 200);
  assertResponse('GET', '/v1/models', list);
  assert.deepEqual(
    list.json.data.map((m) => m.id),
    [MODEL_ID],
  );
  const one = await request(daemon, { path: `/v1/models/${MODEL_ID}` });
  assert.equal(one.status, 200);
  assertResponse('GET', '/v1/models/{id}', one);
  assert.equal(one.json.id, MODEL_ID);
  const missing = await request(daemon, { path: '/v1/models/no-such-model' });
  assertError(missing, 404, { method: 'GET', template: '/v1/models/{id}' });
});

const PROMPTS = ['Once upon a time', 'The little dog', 'Lily and Tom went to the park. They'];

test('greedy /v1/completions equals `ember run` for the same prompt and token count', async () => {
  for (const prompt of PROMPTS) {
    for (const n of [1, 48]) {
      const expected = emberRunGreedy(prompt, n);
      const r = await complete({ model: MODEL_ID, prompt, max_tokens: n, temperature: 0 });
      assert.equal(r.choices[0].text, expected, `prompt ${JSON.stringify(prompt)}, ${n} tokens`);
      assert.equal(r.model, MODEL_ID);
      assert.equal(r.object, 'text_completion');
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
      if (r.choices[0].finish_reason === 'length') assert.equal(r.usage.completion_tokens, n);
    }
  }
});

test('prompt-prefix reuse: a prompt extending the previous one reuses its tokens and still equals `ember run`', async () => {
  const metric = async (name) => {
    const m = await request(daemon, { path: '/metrics' });
    assert.equal(m.status, 200, m.text);
    const hit = m.text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
    assert.ok(hit, `/metrics has ${name}`);
    return Number(hit[1]);
  };
  const base = 'One day, a little bird flew over the big green tree.';
  await complete({ prompt: base, max_tokens: 4, temperature: 0 });
  const reusedBefore = await metric('ember_reused_prompt_tokens_total');
  const longer = `${base} The bird saw`;
  const r = await complete({ prompt: longer, max_tokens: 32, temperature: 0 });
  assert.ok((await metric('ember_reused_prompt_tokens_total')) > reusedBefore, 'the shared prefix was reused');
  assert.equal(r.choices[0].text, emberRunGreedy(longer, 32));
});

test('a streamed greedy completion has the same text as the non-streamed one', async () => {
  const body = { prompt: PROMPTS[0], max_tokens: 40, temperature: 0 };
  const plain = await complete(body);
  const s = await collectStream(daemon, { path: '/v1/completions', json: { ...body, stream: true } });
  const { text, finishReason } = assertCleanStream(s, '/v1/completions');
  assert.equal(text, plain.choices[0].text);
  assert.equal(finishReason, plain.choices[0].finish_reason);
});

test('prompt as an array of one string equals the string prompt', async () => {
  const a = await complete({ prompt: PROMPTS[1], max_tokens: 12, temperature: 0 });
  const b = await complete({ prompt: [PROMPTS[1]], max_tokens: 12, temperature: 0 });
  assert.equal(b.choices[0].text, a.choices[0].text);
});

test('chat completion (non-streamed): the OpenAI shape with an assistant message', async () => {
  const r = await chat({
    model: MODEL_ID,
    messages: [
      { role: 'system', content: 'You tell stories.' },
      { role: 'user', content: [{ type: 'text', text: 'Tell me about a cat.' }] },
    ],
    max_tokens: 24,
    temperature: 0,
    user: 'ignored',
    unknown_field_is_ignored: { deep: [1, 2] },
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens <= 24);
  // max_completion_tokens is OpenAI's newer name for max_tokens
  const r2 = await chat({ messages: [{ role: 'user', content: 'Hi' }], max_completion_tokens: 3, temperature: 0 });
  assert.ok(r2.usage.completion_tokens <= 3);
});

test('explicit nulls (as OpenAI clients send them) mean "default"', async () => {
  const nulls = { temperature: null, top_p: null, n: null, stop: null, seed: null, presence_penalty: null, frequency_penalty: null,
    logit_bias: null, stream: null, stream_options: null, user: null, top_k: null, min_p: null, repeat_penalty: null, model: null };
  const r = await complete({ prompt: 'Once upon a time', max_tokens: 8, ...nulls });
  assert.equal(r.usage.completion_tokens <= 8, true);
  const c = await chat({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: null, max_completion_tokens: 4, ...nulls });
  assert.ok(c.usage.completion_tokens <= 4, `max_completion_tokens applies when max_tokens is null: ${c.usage.completion_tokens}`);
  const g = await complete({ prompt: 'Once upon a time', max_tokens: 8, temperature: 0, n: 1 });
  assert.equal(g.choices[0].text, emberRunGreedy('Once upon a time', 8));
});

test('the same seed gives the same text at temperature > 0', async () => {
  const body = { prompt: PROMPTS[2], max_tokens: 32, temperature: 1.0, top_k: 0, top_p: 1, min_p: 0, seed: 1234 };
  const a = await complete(body);
  const b = await complete(body);
  assert.equal(b.choices[0].text, a.choices[0].text);
});

test('stop sequences truncate the output and give finish_reason "stop"', async () => {
  const base = { prompt: 'Once upon a time', max_tokens: 80, temperature: 0 };
  const full = (await complete(base)).choices[0].text;
  // A stop string from the middle of the greedy text: the output must end right before it.
  const words = full.split(/\s+/).filter((w) => w.length >= 3);
  assert.ok(words.length > 6, `the greedy text has words: ${JSON.stringify(full)}`);
  const stop = words[Math.floor(words.length / 2)];
  const expected = full.slice(0, full.indexOf(stop));

  const r = await complete({ ...base, stop });
  assert.equal(r.choices[0].text, expected, `stop ${JSON.stringify(stop)}`);
  assert.equal(r.choices[0].finish_reason, 'stop');

  const r2 = await complete({ ...base, stop: ['never appears 1', stop, 'never appears 2'] });
  assert.equal(r2.choices[0].text, expected);
  assert.equal(r2.choices[0].finish_reason, 'stop');

  const s = await collectStream(daemon, { path: '/v1/completions', json: { ...base, stop, stream: true } });
  const streamed = assertCleanStream(s, '/v1/completions');
  assert.equal(streamed.text, expected, 'a streamed completion stops at the same place');
  assert.equal(streamed.finishReason, 'stop');

  const c = await chat({ messages: [{ role: 'user', content: 'Tell a story.' }], max_tokens: 60, temperature: 0 });
  const chatWords = c.choices[0].message.content.split(/\s+/).filter((w) => w.length >= 3);
  if (chatWords.length > 4) {
    const chatStop = chatWords[2];
    const content = c.choices[0].message.content;
    const c2 = await chat({ messages: [{ role: 'user', content: 'Tell a story.' }], max_tokens: 60, temperature: 0, stop: chatStop });
    assert.equal(c2.choices[0].message.content, content.slice(0, content.indexOf(chatStop)));
    assert.equal(c2.choices[0].finish_reason, 'stop');
  }

  // OpenAI allows up to 4 stop strings
  const tooMany = await post('/v1/completions', { ...base, stop: ['a', 'b', 'c', 'd', 'e'] });
  assertError(tooMany, 400, { method: 'POST', template: '/v1/completions', param: 'stop' });
});

test('penalties and logit_bias change greedy output; out-of-range values are 400', async () => {
  const base = { prompt: 'Once upon a time', max_tokens: 120, temperature: 0 };
  const plain = (await complete(base)).choices[0].text;
  const penalized = (await complete({ ...base, frequency_penalty: 2, presence_penalty: 2 })).choices[0].text;
  assert.notEqual(penalized, plain, 'strong frequency/presence penalties change a repetitive greedy text');
  const repeated = (await complete({ ...base, repeat_penalty: 1.5 })).choices[0].text;
  assert.notEqual(repeated, plain, 'repeat_penalty changes it too');

  // +100 on one token makes it the greedy choice every time.
  const tok = await post('/tokenize', { content: ' dog', add_special: false });
  assert.equal(tok.status, 200, tok.text);
  const id = tok.json.tokens.at(-1);
  const forced = await complete({ ...base, max_tokens: 4, logit_bias: { [id]: 100 } });
  const detok = await post('/detokenize', { tokens: [id, id, id, id] });
  assert.equal(detok.status, 200, detok.text);
  assert.equal(forced.choices[0].text, detok.json.content, `logit_bias {${id}: 100} forces token ${id}`);
  // -100 bans a token: the greedy first token is replaced by another one
  // (its id: the one token the prompt's tokens gain when the text is appended)
  const first = (await complete({ ...base, max_tokens: 1 })).choices[0].text;
  const promptIds = (await post('/tokenize', { content: base.prompt })).json.tokens;
  const extendedIds = (await post('/tokenize', { content: base.prompt + first })).json.tokens;
  assert.deepEqual(extendedIds.slice(0, promptIds.length), promptIds);
  assert.equal(extendedIds.length, promptIds.length + 1, `${JSON.stringify(first)} is one token after the prompt`);
  const firstId = extendedIds.at(-1);
  const banned = await complete({ ...base, max_tokens: 1, logit_bias: { [firstId]: -100 } });
  assert.notEqual(banned.choices[0].text, first, `logit_bias {${firstId}: -100} bans ${JSON.stringify(first)}`);

  for (const [field, value] of [
    ['presence_penalty', 2.5],
    ['frequency_penalty', -3],
    ['temperature', 2.5],
    ['top_p', 1.5],
    ['min_p', -0.1],
    ['top_k', -1],
  ]) {
    const res = await post('/v1/completions', { ...base, [field]: value });
    assertError(res, 400, { method: 'POST', template: '/v1/completions', param: field, what: `${field} ${value}` });
  }
  const badBias = await post('/v1/completions', { ...base, logit_bias: { 999999: 5 } });
  assertError(badBias, 400, { method: 'POST', template: '/v1/completions', param: 'logit_bias' });
});

test('/tokenize and /detokenize round trip, consistent with usage.prompt_tokens', async () => {
  const text = 'Once upon a time, there was a little girl named Lily.';
  const t = await post('/tokenize', { content: text });
  assert.equal(t.status, 200, t.text);
  assertResponse('POST', '/tokenize', t);
  const ids = t.json.tokens;
  assert.ok(ids.length > 5 && ids.every(Number.isInteger), `token ids: ${JSON.stringify(ids)}`);

  const d = await post('/detokenize', { tokens: ids });
  assert.equal(d.status, 200, d.text);
  assertResponse('POST', '/detokenize', d);
  // SentencePiece vocabularies mark word starts with a space, so the decoded text may begin
  // with the space the tokenizer put in front of the first word; nothing else may differ.
  assert.equal(d.json.content.replace(/^ /, ''), text);

  // add_special: the model's BOS in front, the rest unchanged; a completion counts the same tokens
  const withBos = await post('/tokenize', { content: text, add_special: true });
  assert.equal(withBos.status, 200, withBos.text);
  assert.deepEqual(withBos.json.tokens.slice(1), ids);
  const r = await complete({ prompt: text, max_tokens: 1, temperature: 0 });
  assert.equal(r.usage.prompt_tokens, withBos.json.tokens.length);

  // with_pieces: {id, piece} objects
  const pieces = await post('/tokenize', { content: 'Once upon', with_pieces: true });
  assert.equal(pieces.status, 200, pieces.text);
  assertResponse('POST', '/tokenize', pieces);
  assert.ok(pieces.json.tokens.every((p) => Number.isInteger(p.id) && typeof p.piece === 'string'));

  // a prompt of token ids is used as it is
  const byIds = await complete({ prompt: withBos.json.tokens, max_tokens: 8, temperature: 0 });
  const byText = await complete({ prompt: text, max_tokens: 8, temperature: 0 });
  assert.equal(byIds.choices[0].text, byText.choices[0].text);

  const bad = await post('/detokenize', { tokens: [1, 'two'] });
  assertError(bad, 400, { method: 'POST', template: '/detokenize', param: 'tokens' });
  const outside = await post('/detokenize', { tokens: [1 << 30] });
  assertError(outside, 400, { method: 'POST', template: '/detokenize', param: 'tokens' });
  const noContent = await post('/tokenize', { text: 'wrong field' });
  assertError(noContent, 400, { method: 'POST', template: '/tokenize', param: 'content' });
});

test('GET /metrics is Prometheus text with the documented families', async () => {
  await request(daemon, { path: '/health' });
  const res = await request(daemon, { path: '/metrics' });
  assert.equal(res.status, 200, res.text);
  assertResponse('GET', '/metrics', res);
  assert.match(res.headers['content-type'], /^text\/plain/);
  for (const family of [
    'ember_http_requests_total',
    'ember_prompt_tokens_total',
    'ember_generated_tokens_total',
    'ember_prefill_tokens_per_second',
    'ember_decode_tokens_per_second',
    'ember_queue_depth',
    'ember_active_requests',
    'ember_jobs_cancelled_total',
  ]) {
    assert.match(res.text, new RegExp(`^# TYPE ${family} (counter|gauge)$`, 'm'), `${family} is exported`);
  }
  assert.match(res.text, /^ember_http_requests_total\{endpoint="\/health",status="200"\} [1-9]\d*$/m);
  assert.match(res.text, /^ember_http_requests_total\{endpoint="\/v1\/completions",status="200"\} [1-9]\d*$/m);
  // every sample line is "name{labels} value" or "name value"
  for (const line of res.text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    assert.match(line, /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (-?[0-9.eE+-]+|NaN|[+-]Inf)$/, `sample line: ${line}`);
  }
});
