// Assertions shared by the test files: OpenAI error answers and whole streams, each checked
// against api/openapi.yaml as well as against the behaviour the daemon documents.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { emberBinary, modelPath } from './env.mjs';
import { assertResponse, assertStreamEvent } from './schema.mjs';

export const MODEL_ID = 'stories260K';  // the model file's name without extension

// An OpenAI error answer: the status, a JSON body of the Error schema (as documented for this
// operation), and, when given, the field named in error.param.
export function assertError(res, status, { method, template, param, code, what = '' } = {}) {
  const label = what ? `${what}: ` : '';
  assert.equal(res.status, status, `${label}expected ${status}, got ${res.status}: ${res.text}`);
  assert.match(res.headers['content-type'] || '', /^application\/json/, `error content type: ${res.headers['content-type']}`);
  if (method && template) assertResponse(method, template, res);
  assert.ok(res.json?.error, `an error body {"error": {...}}: ${res.text}`);
  const e = res.json.error;
  for (const key of ['message', 'type', 'param', 'code']) assert.ok(key in e, `error.${key} present: ${res.text}`);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0, 'error.message is not empty');
  if (param !== undefined) assert.equal(e.param, param, `${label}error.param: ${res.text}`);
  if (code !== undefined) assert.equal(e.code, code, `${label}error.code: ${res.text}`);
  return e;
}

// Checks the shape and order of a finished stream (from collectStream) of `template`
// ('/v1/chat/completions' or '/v1/completions'); every data event is validated against the
// document. Returns {text, finishReason, usage, chunks}.
export function assertCleanStream(stream, template, { includeUsage = false } = {}) {
  assert.equal(stream.status, 200, `stream status ${stream.status}: ${stream.text ?? ''}`);
  assert.match(stream.headers['content-type'] || '', /^text\/event-stream/);
  const events = stream.events;
  assert.ok(events.length >= 2, `a stream has chunks and [DONE]; got ${events.length} events`);
  assert.equal(events.at(-1).data, '[DONE]', `the last event is [DONE]; got ${events.at(-1).raw}`);
  assert.equal(events.filter((e) => e.data === '[DONE]').length, 1, 'exactly one [DONE]');
  assert.ok(stream.complete, 'the HTTP response ended normally (last chunk received)');
  const chunks = events.slice(0, -1);
  for (const e of chunks) {
    assert.notEqual(e.json, undefined, `every event before [DONE] is JSON: ${e.raw}`);
    assertStreamEvent(template, e.json);
    assert.equal(e.json.error, undefined, `no error event in a clean stream: ${e.raw}`);
  }
  const chat = template === '/v1/chat/completions';
  const objectName = chat ? 'chat.completion.chunk' : 'text_completion';
  const first = chunks[0].json;
  for (const { json } of chunks) {
    assert.equal(json.object, objectName);
    assert.equal(json.id, first.id, 'every chunk has the same id');
    assert.equal(json.created, first.created, 'every chunk has the same created');
    assert.equal(json.model, first.model, 'every chunk names the same model');
  }

  let usage = null;
  let body = chunks;
  if (includeUsage) {
    const last = chunks.at(-1).json;
    assert.deepEqual(last.choices, [], `with include_usage the chunk before [DONE] has empty choices: ${JSON.stringify(last)}`);
    assert.ok(last.usage, 'and carries usage');
    usage = last.usage;
    assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
    body = chunks.slice(0, -1);
  } else {
    for (const { json } of chunks) {
      assert.ok(json.choices.length === 1, `without include_usage every chunk has one choice: ${JSON.stringify(json)}`);
      assert.ok(json.usage == null, 'and no usage');
    }
  }
  assert.ok(body.length >= 1, 'at least one choice chunk');
  for (const { json } of body) assert.equal(json.choices.length, 1, 'choice chunks have one choice');

  // finish_reason: null everywhere but the last choice chunk.
  const finishes = body.map((e) => e.json.choices[0].finish_reason);
  assert.ok(finishes.slice(0, -1).every((f) => f === null), `finish_reason only on the last chunk: ${finishes}`);
  const finishReason = finishes.at(-1);
  assert.ok(finishReason === 'stop' || finishReason === 'length', `the last chunk has finish_reason: ${finishReason}`);

  let text = '';
  if (chat) {
    const deltas = body.map((e) => e.json.choices[0].delta);
    assert.equal(deltas[0].role, 'assistant', `the first delta carries the role: ${JSON.stringify(deltas[0])}`);
    deltas.slice(1).forEach((d) => assert.equal(d.role, undefined, 'only the first delta has the role'));
    for (const d of deltas) text += d.content ?? '';
    // Content arrives in the deltas before the finish chunk; the finish chunk adds none.
    assert.ok(!deltas.at(-1).content, `the finish chunk's delta is empty: ${JSON.stringify(deltas.at(-1))}`);
  } else {
    for (const e of body) text += e.json.choices[0].text;
  }
  return { text, finishReason, usage, chunks };
}

// What `ember run` prints for the same prompt, greedily (the reference for the daemon).
export function emberRunGreedy(prompt, nPredict, extraArgs = []) {
  const r = spawnSync(emberBinary, ['run', '-m', modelPath, '-t', '1', '-p', prompt, '-n', String(nPredict), '--temp', '0', ...extraArgs], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, `ember run failed: ${r.stderr}`);
  return r.stdout;
}
