// Drives `qmpi serve` with two application frameworks as their users write them: the Vercel AI
// SDK (ai 6 + @ai-sdk/openai-compatible) and LangChain.js (@langchain/openai), and prints one
// JSON object of what they saw for serve_js_clients.py to check. Usage:
//   node js_clients.mjs MODULE_DIR BASE_URL API_KEY MODEL
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [moduleDir, baseURL, apiKey, model] = process.argv.slice(2);
const require = createRequire(path.join(moduleDir, "package.json"));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
const { generateText, streamText, generateObject, tool, Output } = await load("ai");
const { createOpenAICompatible } = await load("@ai-sdk/openai-compatible");
const { ChatOpenAI, OpenAI } = await load("@langchain/openai");
const { z } = await load("zod");

const out = {};
// Closed sets only: a random-weight model must finish a valid object within max tokens.
const answer = z.object({ color: z.enum(["red", "green", "blue"]), sure: z.boolean() });
const cities = z.object({ city: z.enum(["Paris", "Rome"]) });
const prompt = "Pick a color.";

// --- Vercel AI SDK ---
const provider = createOpenAICompatible({
  name: "qmpi", baseURL, apiKey, supportsStructuredOutputs: true,
});
const lm = provider.chatModel(model);
const text = await generateText({ model: lm, prompt, maxOutputTokens: 6, temperature: 0, seed: 1 });
out.aiText = { text: text.text, finish: text.finishReason, tokens: text.usage.outputTokens };

const st = streamText({ model: lm, prompt, maxOutputTokens: 6, temperature: 0, seed: 1 });
let streamed = "";
for await (const part of st.textStream) streamed += part;
out.aiStream = { text: streamed, finish: await st.finishReason };

const obj = await generateObject({ model: lm, schema: answer, prompt, maxOutputTokens: 40, temperature: 0 });
out.aiObject = obj.object;

const called = await generateText({
  model: lm, prompt: "Weather in Paris?", maxOutputTokens: 40, temperature: 0,
  tools: { get_weather: tool({ description: "Weather of a city", inputSchema: cities }) },
  toolChoice: "required",
});
out.aiTools = called.toolCalls.map((c) => ({ name: c.toolName, input: c.input }));
out.aiFinish = called.finishReason;

// --- LangChain.js ---
const chat = new ChatOpenAI({
  model, apiKey, temperature: 0, maxTokens: 6, maxRetries: 0, configuration: { baseURL },
});
const msg = await chat.invoke("Say hello");
out.lcInvoke = { content: msg.content, tokens: msg.usage_metadata?.output_tokens ?? null };
let lcStreamed = "";
for await (const chunk of await chat.stream("Say hello")) lcStreamed += chunk.content;
out.lcStream = lcStreamed;

const structured = new ChatOpenAI({
  model, apiKey, temperature: 0, maxTokens: 40, maxRetries: 0, configuration: { baseURL },
}).withStructuredOutput(answer, { name: "answer", method: "jsonSchema" });
out.lcObject = await structured.invoke(prompt);

const withTools = new ChatOpenAI({
  model, apiKey, temperature: 0, maxTokens: 40, maxRetries: 0, configuration: { baseURL },
}).bindTools([{ name: "get_weather", description: "Weather of a city", schema: cities }],
  { tool_choice: "required" });
const toolMsg = await withTools.invoke("Weather in Rome?");
out.lcTools = toolMsg.tool_calls.map((c) => ({ name: c.name, args: c.args }));

// LangChain's legacy completions class always sends `prompt` as a list.
const legacy = new OpenAI({
  model, apiKey, temperature: 0, maxTokens: 4, maxRetries: 0, configuration: { baseURL },
});
out.lcLegacy = await legacy.invoke("Once upon a time");

console.log(JSON.stringify(out));
