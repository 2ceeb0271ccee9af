// Tool calls through the real client libraries: the `openai` package (tool_choice auto, required
// and named; streamed; a full loop with a role "tool" result), the AI SDK (generateText with tools,
// a two-step loop that runs the tool) and LangChain (bindTools, withStructuredOutput in
// functionCalling and jsonMode). The model is stories260K: no template of its own, so the generic
// syntax, whose replies are always grammar-constrained to a call or a response object. Every call
// must name a declared function and carry arguments valid against its schema. The tiny model rarely
// chooses to stop adding parallel calls, so the tests that need a finished reply ask for one call
// (parallel_tool_calls false); parallel calls are checked on their own.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { z } from 'zod';
import { generateText, stepCountIs, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { daemonWithClient } from './helpers/daemon.mjs';
import { MODEL_ID } from './helpers/expect.mjs';
import { assertSchema } from './helpers/schema.mjs';

const ctx = daemonWithClient(OpenAI);

const Weather = z.object({ city: z.string().max(10), unit: z.enum(['C', 'F']) });
const Add = z.object({ a: z.number().int().min(0).max(99), b: z.number().int().min(0).max(99) });
const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: z.toJSONSchema(Weather),
    },
  },
  { type: 'function', function: { name: 'add', description: 'Adds two numbers', parameters: z.toJSONSchema(Add) } },
];
const schemas = { get_weather: Weather, add: Add };
const messages = [{ role: 'user', content: 'What is the weather in Oslo?' }];

// A chat request that must call one tool (the tests that need a finished reply); `extra` overrides.
const oneCall = (extra) => ctx.client.chat.completions.create({
  model: MODEL_ID,
  messages,
  tools,
  tool_choice: 'required',
  parallel_tool_calls: false,
  max_tokens: 300,
  ...extra,
});

function checkCalls(calls, { only } = {}) {
  assert.ok(Array.isArray(calls) && calls.length > 0, `tool_calls: ${JSON.stringify(calls)}`);
  for (const c of calls) {
    assert.equal(c.type, 'function');
    assert.match(c.id, /^call_/);
    if (only) assert.equal(c.function.name, only);
    assert.ok(c.function.name in schemas, c.function.name);
    schemas[c.function.name].parse(JSON.parse(c.function.arguments));
  }
}

test('tool_choice required: every reply is a valid call; finish_reason tool_calls; the tools are in the prompt', async () => {
  const plain = await ctx.client.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 5 });
  for (const seed of [1, 2, 3]) {
    const r = await oneCall({ seed });
    assertSchema('ChatCompletion', r);
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
    assert.equal(choice.message.content, null);
    checkCalls(choice.message.tool_calls);
    assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 20, 'the tool definitions are part of the prompt');
  }
});

test('a named function is called once; parallel calls are valid up to where max_tokens cuts them', async () => {
  const r = await ctx.client.chat.completions.create({
    model: MODEL_ID,
    messages,
    tools,
    tool_choice: { type: 'function', function: { name: 'add' } },
    max_tokens: 300,
    seed: 7,
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  checkCalls(r.choices[0].message.tool_calls, { only: 'add' });
  assert.equal(r.choices[0].message.tool_calls.length, 1);
  for (const seed of [1, 2]) {
    const p = await ctx.client.chat.completions.create({ model: MODEL_ID, messages, tools, tool_choice: 'required', max_tokens: 400, seed });
    const choice = p.choices[0];
    if (choice.finish_reason === 'tool_calls') {
      checkCalls(choice.message.tool_calls);
    } else {
      assert.equal(choice.finish_reason, 'length');
      assert.ok(choice.message.content.startsWith('{"tool_calls": [{"name": "'), choice.message.content);
    }
  }
});

test('tool_choice auto: a call or a text reply, never a malformed one; streamed calls accumulate by index', async () => {
  for (const seed of [4, 5, 6, 7]) {
    const r = await ctx.client.chat.completions.create({
      model: MODEL_ID,
      messages,
      tools,
      parallel_tool_calls: false,
      max_tokens: 300,
      seed,
    });
    const choice = r.choices[0];
    if (choice.message.tool_calls) {
      assert.equal(choice.finish_reason, 'tool_calls');
      checkCalls(choice.message.tool_calls);
    } else {
      assert.equal(typeof choice.message.content, 'string');
      assert.ok(['stop', 'length'].includes(choice.finish_reason));
    }
  }
  const stream = await oneCall({ seed: 8, stream: true });
  const calls = [];
  let finish;
  for await (const chunk of stream) {
    assertSchema('ChatCompletionChunk', chunk);
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (d.function?.arguments) calls[d.index].function.arguments += d.function.arguments;
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  checkCalls(calls);
});

test('a full loop: call, role "tool" result, final answer', async () => {
  const first = await oneCall({ seed: 9 });
  const assistant = first.choices[0].message;
  checkCalls(assistant.tool_calls);
  const history = [
    ...messages,
    assistant,
    ...assistant.tool_calls.map((c) => ({ role: 'tool', tool_call_id: c.id, content: '{"temperature": 12}' })),
  ];
  const final = await ctx.client.chat.completions.create({
    model: MODEL_ID,
    messages: history,
    tools,
    tool_choice: 'none',
    max_tokens: 20,
    seed: 9,
  });
  assert.equal(typeof final.choices[0].message.content, 'string');
  assert.ok(!final.choices[0].message.tool_calls);
  const without = await ctx.client.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 1 });
  assert.ok(final.usage.prompt_tokens > without.usage.prompt_tokens + 20, 'the call and its result are in the prompt');
});

test('bad tool requests are 400s naming the field', async () => {
  const cases = [
    [{ tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools[0].function.name'],
    [{ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
    [{ tool_choice: 'required' }, 'tool_choice'],
    [{ tools: [tools[0], tools[0]] }, 'tools[1].function.name'],
    [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { type: 'array', uniqueItems: true } } } } }], tool_choice: 'required' }, 'tools'],
  ];
  for (const [extra, param] of cases) {
    await assert.rejects(
      ctx.client.chat.completions.create({ model: MODEL_ID, messages, max_tokens: 5, ...extra }),
      (e) => e.status === 400 && e.param === param,
      JSON.stringify(extra),
    );
  }
  await assert.rejects(
    ctx.client.chat.completions.create({ model: MODEL_ID, messages: [...messages, { role: 'tool', content: 'x' }], max_tokens: 5 }),
    (e) => e.status === 400 && e.param === 'messages[1].tool_call_id',
  );
});

test('AI SDK generateText: required tool call, then a two-step loop that runs the tool', async () => {
  const provider = createOpenAICompatible({ name: 'ember', baseURL: `${ctx.daemon.baseUrl}/v1`, apiKey: 'x' });
  const weather = tool({
    description: 'The weather in a city',
    inputSchema: Weather,
    execute: async ({ city }) => ({ city, temperature: 12 }),
  });
  const one = await generateText({
    model: provider(MODEL_ID),
    prompt: 'Weather in Oslo?',
    tools: { get_weather: weather },
    toolChoice: 'required',
    providerOptions: { ember: { parallel_tool_calls: false } },
    maxOutputTokens: 300,
    seed: 11,
  });
  assert.ok(one.toolCalls.length > 0);
  for (const c of one.toolCalls) Weather.parse(c.input);
  assert.equal(one.toolResults[0].output.temperature, 12);

  const loop = await generateText({
    model: provider(MODEL_ID),
    prompt: 'Weather in Oslo?',
    tools: { get_weather: weather },
    stopWhen: stepCountIs(2),
    prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: 'required' } : { toolChoice: 'none' }),
    providerOptions: { ember: { parallel_tool_calls: false } },
    maxOutputTokens: 200,
    seed: 12,
  });
  assert.equal(loop.steps.length, 2);
  assert.ok(loop.steps[0].toolCalls.length > 0);
  assert.equal(typeof loop.text, 'string');
});

test('LangChain bindTools (auto, required, named) and withStructuredOutput (functionCalling, jsonMode)', async () => {
  const llm = new ChatOpenAI({
    model: MODEL_ID,
    apiKey: 'x',
    configuration: { baseURL: `${ctx.daemon.baseUrl}/v1` },
    maxTokens: 300,
    temperature: 0.8,
    maxRetries: 0,
  });
  const lcTools = tools.map((t) => ({ type: 'function', function: t.function }));
  for (const tool_choice of ['required', 'add', 'any']) {
    const msg = await llm.bindTools(lcTools, { tool_choice, parallel_tool_calls: false }).invoke('Add 2 and 3.');
    assert.ok(msg.tool_calls.length > 0, `tool_choice ${tool_choice}: ${JSON.stringify(msg)}`);
    for (const c of msg.tool_calls) {
      if (tool_choice === 'add') assert.equal(c.name, 'add');
      schemas[c.name].parse(c.args);
    }
  }
  const auto = await llm.bindTools(lcTools, { parallel_tool_calls: false }).invoke('Add 2 and 3.');
  for (const c of auto.tool_calls ?? []) schemas[c.name].parse(c.args);

  const viaTool = await llm.withStructuredOutput(Add, { method: 'functionCalling', name: 'add' }).invoke('Add 2 and 3.');
  Add.parse(viaTool);
  // json mode constrains the reply to a JSON object, not to the schema, and the tiny model's strings
  // can run to max_tokens: the raw reply must be an object, or the start of one cut by the limit.
  const viaJson = await llm
    .withStructuredOutput(z.toJSONSchema(Add), { method: 'jsonMode', includeRaw: true })
    .invoke('Add 2 and 3, as JSON.');
  const raw = viaJson.raw;
  if (raw.response_metadata.finish_reason === 'stop') {
    assert.equal(typeof viaJson.parsed, 'object');
  } else {
    assert.equal(raw.response_metadata.finish_reason, 'length');
    assert.ok(raw.content.startsWith('{'), raw.content);
  }
});
