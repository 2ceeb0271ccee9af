// Greedy continuations by llama.cpp (the build inside node-llama-cpp) for the reference files the
// tests compare with: FIXTURES/reference/NAME, one JSON object per prompt and line,
//   {"prompt", "prompt_tokens" (BOS first), "greedy_tokens", "text"}.
// The prompts, models and token counts are in reference_prompts.json beside this file.
//
//   node make_references.mjs NPM_DIR FIXTURES_DIR OUT_DIR
//
// NPM_DIR holds node_modules/node-llama-cpp (bench/llamacpp/setup.sh installs it); models are read
// from FIXTURES_DIR/models, the files written to OUT_DIR/reference. Run by make-references.sh.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const [npmDir, fixturesDir, outDir] = process.argv.slice(2);
if (!outDir) {
  console.error('usage: node make_references.mjs NPM_DIR FIXTURES_DIR OUT_DIR');
  process.exit(2);
}
// The package lives in the cache folder, not beside this script, where `import` would look.
const entry = createRequire(path.join(path.resolve(npmDir), 'package.json')).resolve('node-llama-cpp');
const { getLlama } = await import(pathToFileURL(entry).href);

const here = path.dirname(fileURLToPath(import.meta.url));
const specs = JSON.parse(fs.readFileSync(path.join(here, 'reference_prompts.json'), 'utf8'));

// CPU only, and never a source build: the prebuilt libraries are the fixed peer.
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });

// One prompt from an empty context: BOS, the prompt's tokens without special-token parsing, then
// argmax (temperature 0) until `count` tokens or end of sequence.
async function greedy(model, prompt, count) {
  const context = await model.createContext({ contextSize: 512, threads: 2 });
  try {
    const promptTokens = [model.tokens.bos, ...model.tokenize(prompt, false)];
    const generated = [];
    for await (const token of context.getSequence().evaluate(promptTokens, { temperature: 0 })) {
      generated.push(token);
      if (generated.length >= count || token === model.tokens.eos) break;
    }
    return { prompt, prompt_tokens: promptTokens, greedy_tokens: generated, text: model.detokenize(generated) };
  } finally {
    await context.dispose();
  }
}

fs.mkdirSync(path.join(outDir, 'reference'), { recursive: true });
for (const [name, spec] of Object.entries(specs)) {
  const model = await llama.loadModel({ modelPath: path.join(fixturesDir, spec.model) });
  const lines = [];
  for (const prompt of spec.prompts) lines.push(JSON.stringify(await greedy(model, prompt, spec.tokens)));
  await model.dispose();
  fs.writeFileSync(path.join(outDir, 'reference', name), lines.join('\n') + '\n');
  console.error(`make_references: reference/${name} (${lines.length} prompts)`);
}
