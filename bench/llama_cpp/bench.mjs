// Times llama.cpp (through node-llama-cpp's prebuilt CPU binaries) the way `qmpi bench` times qmpi:
// a prompt of random token ids prefilled in one batch, then greedy decode of gen tokens, on the
// given number of threads, best of `repeats`. Prints one JSON line.
//   node bench.mjs MODEL.gguf PROMPT_LEN GEN_LEN THREADS REPEATS
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, promptLen, genLen, threads, repeats] = process.argv.slice(2);
const P = Number(promptLen), G = Number(genLen), T = Number(threads), R = Number(repeats ?? 2);

const llama = await getLlama({gpu: false, build: "never", maxThreads: T, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath});
const context = await model.createContext({contextSize: P + G + 16, batchSize: Math.max(P, 32),
                                           threads: {ideal: T, min: T}, sequences: 1});
const seq = context.getSequence();

// Deterministic ids below the tokenizer's 151643 regular tokens, like qmpi bench's random prompt.
let state = 12345;
const prompt = Array.from({length: P}, () => (state = (state * 1103515245 + 12345) % 2147483648) % 151643);

let bestPrefill = Infinity, bestDecode = Infinity, generated = 0, tokens = [];
for (let r = 0; r < R; ++r) {
  await seq.clearHistory();
  let t0 = process.hrtime.bigint();
  await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, P - 1));
  const prefill = Number(process.hrtime.bigint() - t0) / 1e9;
  // The last prompt token starts the decode: each step then evaluates one token and samples one.
  generated = 0;
  tokens = [];
  t0 = process.hrtime.bigint();
  for await (const t of seq.evaluate([prompt[P - 1]], {temperature: 0})) {
    tokens.push(t);
    if (++generated === G) break;
  }
  const decode = Number(process.hrtime.bigint() - t0) / 1e9;
  bestPrefill = Math.min(bestPrefill, prefill / (P - 1));
  bestDecode = Math.min(bestDecode, decode / generated);
}
// ggml loads the CPU variant that suits this CPU (zen4, icelake, ...): name it in the record.
const variant = readFileSync("/proc/self/maps", "utf8").match(/libggml-cpu-([a-z0-9_]+)\.so/);
console.log(JSON.stringify({engine: "llama.cpp", binding: "node-llama-cpp", cpu_variant: variant ? variant[1] : null,
  prompt_len: P, gen_len: generated, threads: context.currentThreads, kv_dtype: "f16",
  prefill_tokens_per_s: 1 / bestPrefill, decode_tokens_per_s: 1 / bestDecode,
  // the prompt and greedy continuation, so that qmpi's logits can check the conversion
  prompt, tokens}));
await context.dispose();
await model.dispose();
await llama.dispose();
