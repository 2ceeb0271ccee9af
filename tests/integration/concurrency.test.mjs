// Eight concurrent streaming clients with fixed seeds (temperature > 0) on a daemon that generates
// four sequences together (--parallel 4) get exactly the texts they get when run one by one:
// interleaving, slot reuse and prompt-prefix reuse must not leak between requests.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startDaemon } from './helpers/daemon.mjs';
import { assertCleanStream } from './helpers/expect.mjs';
import { collectStream, openStream, request } from './helpers/http.mjs';

let daemon;
before(async () => {
  daemon = await startDaemon({ args: ['--parallel', '4', '--queue', '16'] });
});
after(async () => {
  await daemon?.stop();
});

const STORY = 'Once upon a time, there was a little girl named Lily. She loved to play outside.';

// Half chat, half completions; shared prompt prefixes so prefix reuse is exercised too.
function requestFor(i) {
  const sampling = { temperature: 0.9, top_k: 40, top_p: 0.95, seed: 1000 + i, max_tokens: 200 + 16 * i, stream: true };
  if (i % 2 === 0) {
    return {
      path: '/v1/completions',
      json: { prompt: i < 4 ? `${STORY} One day` : `${STORY} Her friend`, ...sampling },
    };
  }
  return {
    path: '/v1/chat/completions',
    json: { messages: [{ role: 'user', content: i < 4 ? `${STORY} What happened next?` : 'Tell me a story.' }], ...sampling },
  };
}

async function run(i) {
  const { path, json } = requestFor(i);
  const s = await collectStream(daemon, { path, json });
  return assertCleanStream(s, path).text;
}

test('8 concurrent seeded streams produce the same texts as 8 sequential ones', async () => {
  const sequential = [];
  for (let i = 0; i < 8; i++) sequential.push(await run(i));
  assert.ok(sequential.every((t) => t.length > 0), 'every request produced text');
  assert.ok(new Set(sequential).size > 1, 'different seeds and prompts give different texts');

  const concurrent = await Promise.all(Array.from({ length: 8 }, (_, i) => run(i)));
  for (let i = 0; i < 8; i++) {
    assert.equal(concurrent[i], sequential[i], `request ${i} (${requestFor(i).path}, seed ${1000 + i})`);
  }
  // and once more, in reverse submission order, to vary which slot each one gets
  const reversed = await Promise.all(Array.from({ length: 8 }, (_, k) => run(7 - k)));
  for (let k = 0; k < 8; k++) assert.equal(reversed[k], sequential[7 - k], `request ${7 - k}, reverse order`);

  const metrics = await request(daemon, { path: '/metrics' });
  assert.equal(metrics.status, 200, metrics.text);
  assert.match(metrics.text, /^ember_slots 4$/m, 'the engine runs 4 slots');
  assert.match(metrics.text, /^ember_active_requests 0$/m, 'nothing left running');
});

test('with --parallel 4, four streams progress together (interleaved, not one after another)', async () => {
  const body = { prompt: 'Once upon a time', max_tokens: 1200, temperature: 0, stream: true };
  const timings = await Promise.all(
    Array.from({ length: 4 }, async (_, i) => {
      const s = await openStream(daemon, { path: '/v1/completions', json: { ...body, prompt: `${body.prompt} ${i}` } });
      assert.equal(s.status, 200, s.text);
      let first = null;
      let last = null;
      for await (const e of s.events()) {
        if (e.json?.choices?.[0]?.text) {
          first ??= performance.now();
          last = performance.now();
        }
      }
      return { first, last };
    }),
  );
  const latestStart = Math.max(...timings.map((t) => t.first));
  const earliestEnd = Math.min(...timings.map((t) => t.last));
  assert.ok(latestStart < earliestEnd, `every stream had produced text before the first one finished: ${JSON.stringify(timings)}`);
});
