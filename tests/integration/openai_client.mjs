// Drives `qmpi serve` with the official `openai` npm client, as an application would, and
// prints one JSON object of what it saw for serve_openai_npm.py to check. Usage:
//   node openai_client.mjs OPENAI_MODULE_DIR BASE_URL API_KEY MODEL
import { createRequire } from "node:module";
import path from "node:path";

const [moduleDir, baseURL, apiKey, model] = process.argv.slice(2);
const require = createRequire(path.join(moduleDir, "package.json"));
const OpenAI = require("openai");
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
const out = {};
const messages = [{ role: "user", content: "Say hello" }];
const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (e) {
    return { status: e.status ?? null, code: e.code ?? null, type: e.type ?? null,
      param: e.param ?? null };
  }
}

const base = { model, messages, max_tokens: 6, temperature: 0, seed: 3 };
const whole = await client.chat.completions.create(
  { ...base, store: false, metadata: { run: "test" }, user: "u1", parallel_tool_calls: true });
out.whole = { content: whole.choices[0].message.content, finish: whole.choices[0].finish_reason,
  usage: whole.usage, object: whole.object };

let streamed = "";
let finish = null;
let usage = null;
const stream = await client.chat.completions.create(
  { ...base, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  if (chunk.usage) usage = chunk.usage;
}
out.stream = { content: streamed, finish, usage };

const two = await client.chat.completions.create({ ...base, n: 2, temperature: 1 });
out.n2 = two.choices.map((c) => c.index);

const stop = await client.chat.completions.create({ ...base, stop: ["\n"], max_tokens: 12 });
out.stop = { content: stop.choices[0].message.content, finish: stop.choices[0].finish_reason };

const lp = await client.chat.completions.create({ ...base, logprobs: true, top_logprobs: 2 });
out.logprobs = {
  n: lp.choices[0].logprobs.content.length, tokens: lp.usage.completion_tokens,
  top: lp.choices[0].logprobs.content.every((e) => e.top_logprobs.length === 2),
};
let streamedLp = 0;
for await (const chunk of await client.chat.completions.create(
  { ...base, logprobs: true, top_logprobs: 2, stream: true })) {
  for (const c of chunk.choices) streamedLp += c.logprobs?.content?.length ?? 0;
}
out.logprobs.streamed = streamedLp;

// Tools: the SDK's own round trip (the call, then its result) is accepted.
const withTools = await client.chat.completions.create({ ...base, tools, tool_choice: "auto" });
out.tools = { finish: withTools.choices[0].finish_reason,
  calls: withTools.choices[0].message.tool_calls ?? [] };
const roundTrip = await client.chat.completions.create({
  ...base, tools,
  messages: [...messages,
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
      function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }] },
    { role: "tool", tool_call_id: "call_1", content: "sunny" }],
});
out.roundTrip = { finish: roundTrip.choices[0].finish_reason,
  promptTokens: roundTrip.usage.prompt_tokens };
const thinkingOff = await client.chat.completions.create(
  { ...base, chat_template_kwargs: { enable_thinking: false } });
out.thinkingOff = { promptTokens: thinkingOff.usage.prompt_tokens,
  thinkingOnPromptTokens: whole.usage.prompt_tokens };

const completion = await client.completions.create(
  { model, prompt: "Once upon a time", max_tokens: 4, temperature: 0, logprobs: 2 });
out.completion = { tokens: completion.choices[0].logprobs.tokens.length,
  finish: completion.choices[0].finish_reason };

// A list of one prompt, as LangChain's OpenAI class sends every prompt.
const listed = await client.completions.create(
  { model, prompt: ["Once upon a time"], max_tokens: 4, temperature: 0 });
out.listPrompt = { text: listed.choices[0].text, index: listed.choices[0].index,
  choices: listed.choices.length, sameAsString: listed.choices[0].text ===
    (await client.completions.create(
      { model, prompt: "Once upon a time", max_tokens: 4, temperature: 0 })).choices[0].text };

// Several prompts, text and token ids, n 2: choices prompt by prompt (index prompt * n + j),
// each prompt's as its own request gives them (temperature 0), usage over all of them.
const prompts = ["Once upon a time", [9707, 11, 1879], "The river"];
const several = await client.completions.create(
  { model, prompt: prompts, n: 2, max_tokens: 3, temperature: 0 });
const alone = [];
for (const p of prompts)
  alone.push(await client.completions.create({ model, prompt: p, max_tokens: 3, temperature: 0 }));
out.severalPrompts = {
  indexes: several.choices.map((c) => c.index),
  texts: several.choices.map((c) => c.text),
  aloneTexts: alone.map((r) => r.choices[0].text),
  promptTokens: several.usage.prompt_tokens,
  aloneTokens: alone.reduce((s, r) => s + r.usage.prompt_tokens, 0),
  completionTokens: several.usage.completion_tokens,
};

const listedModels = (await client.models.list()).data;
out.modelFields = { maxModelLen: listedModels[0].max_model_len, root: listedModels[0].root };
out.models = listedModels.map((m) => m.id);
out.model = (await client.models.retrieve(model)).id;
out.badModel = await errorOf(client.chat.completions.create({ ...base, model: "gpt-4o" }));
out.badKey = await errorOf(new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 })
  .chat.completions.create(base));
out.unsupported = await errorOf(client.chat.completions.create(
  { ...base, logit_bias: { "5": 10 } }));

// Structured output: a JSON schema, and forced tool calls whose arguments fit the parameters.
const schema = { type: "object", properties: { name: { type: "string", maxLength: 8 },
  n: { type: "integer", minimum: 1, maximum: 99 } }, required: ["name", "n"] };
const structured = await client.chat.completions.create({ ...base, max_tokens: 200, temperature: 1,
  response_format: { type: "json_schema", json_schema: { name: "thing", schema, strict: true } } });
out.jsonSchema = { content: structured.choices[0].message.content,
  finish: structured.choices[0].finish_reason };
for (const [key, choice] of [["toolRequired", "required"],
  ["toolNamed", { type: "function", function: { name: "get_weather" } }]]) {
  const r = await client.chat.completions.create({ ...base, max_tokens: 200, temperature: 1,
    tools, tool_choice: choice });
  const calls = r.choices[0].message.tool_calls ?? [];
  out[key] = { finish: r.choices[0].finish_reason, calls: calls.map((c) => ({
    name: c.function.name, arguments: JSON.parse(c.function.arguments) })) };
}
out.tooLong = await errorOf(client.chat.completions.create({ ...base, max_tokens: 1000000 }));
out.badTemperature = await errorOf(client.chat.completions.create({ ...base, temperature: -1 }));
console.log(JSON.stringify(out));
