// api/openapi.yaml itself: an OpenAPI 3.1 document that describes every endpoint the daemon serves,
// whose references resolve and whose schemas compile in strict JSON Schema 2020-12.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { allRefs, assertSchema, openapi, resolveRef } from './helpers/schema.mjs';

test('the document is OpenAPI 3.1 and lists every endpoint', () => {
  assert.match(openapi.openapi, /^3\.1\.\d+$/);
  const expected = {
    '/health': ['get'],
    '/v1/models': ['get'],
    '/v1/models/{id}': ['get'],
    '/v1/completions': ['post'],
    '/v1/chat/completions': ['post'],
    '/metrics': ['get'],
    '/tokenize': ['post'],
    '/detokenize': ['post'],
  };
  for (const [path, methods] of Object.entries(expected)) {
    for (const m of methods) assert.ok(openapi.paths[path]?.[m], `${m.toUpperCase()} ${path} is described`);
  }
  assert.ok(openapi.paths['/metrics'].get.responses['200'].content['text/plain'], '/metrics is text/plain');
  for (const p of ['/v1/completions', '/v1/chat/completions']) {
    const content = openapi.paths[p].post.responses['200'].content;
    assert.ok(content['application/json'] && content['text/event-stream'], `${p} answers JSON and SSE`);
    for (const status of ['400', '401', '413', '503']) assert.ok(openapi.paths[p].post.responses[status], `${p} documents ${status}`);
  }
  assert.ok(openapi.paths['/health'].get.responses['503'], '/health documents 503 while loading');
  assert.deepEqual(openapi.paths['/health'].get.security, [], '/health is public');
});

test('security schemes: bearer and X-Api-Key', () => {
  const s = openapi.components.securitySchemes;
  assert.equal(s.bearerAuth.type, 'http');
  assert.equal(s.bearerAuth.scheme, 'bearer');
  assert.equal(s.apiKeyHeader.type, 'apiKey');
  assert.equal(s.apiKeyHeader.in, 'header');
  assert.equal(s.apiKeyHeader.name, 'X-Api-Key');
});

test('every reference resolves and every schema compiles', () => {
  for (const ref of allRefs()) resolveRef({ $ref: ref });
  // assertSchema compiles the schema; a throw other than "does not match" is a broken schema.
  for (const name of Object.keys(openapi.components.schemas)) {
    try {
      assertSchema(name, null);
    } catch (e) {
      assert.match(e.message, /does not match/, `schema ${name} compiles: ${e.message}`);
    }
  }
});

test('the request schemas accept what OpenAI clients send and name the local extensions', () => {
  assertSchema('ChatCompletionRequest', {
    model: 'x',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'developer', content: [{ type: 'text', text: 'Really.' }] },
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: null },
    ],
    max_completion_tokens: 8,
    temperature: 0.7,
    top_p: 0.9,
    n: 1,
    stop: ['\n', 'END'],
    seed: 42,
    presence_penalty: 0.5,
    frequency_penalty: -0.5,
    logit_bias: { 13: -100, 7: 5 },
    stream: true,
    stream_options: { include_usage: true },
    user: 'someone',
    top_k: 40,
    min_p: 0.05,
    repeat_penalty: 1.1,
  });
  assertSchema('CompletionRequest', { prompt: 'Once', max_tokens: 4, stop: 'x' });
  assertSchema('CompletionRequest', { prompt: [1, 2, 3] });
  assertSchema('CompletionRequest', { prompt: ['Once'] });
  const fields = openapi.components.schemas.SamplingFields.properties;
  for (const f of ['model', 'max_tokens', 'temperature', 'top_p', 'n', 'stop', 'seed', 'presence_penalty', 'frequency_penalty',
    'logit_bias', 'stream', 'stream_options', 'user', 'top_k', 'min_p', 'repeat_penalty']) {
    assert.ok(fields[f], `request field ${f} is documented`);
  }
  assert.throws(() => assertSchema('CompletionRequest', { prompt: 'x', stop: ['a', 'b', 'c', 'd', 'e'] }), /does not match/);
  assert.throws(() => assertSchema('ChatCompletionRequest', { messages: [{ role: 'function', content: 'x' }] }), /does not match/);
  assertSchema('ChatCompletionRequest', {
    messages: [{ role: 'tool', content: 'x', tool_call_id: 'call_1' }],
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
    tool_choice: 'required',
    n: 2,
  });
});
