// The openai npm package (an independent client) against a live mcserve: completions (plain with
// n = 2 and echo, streamed with stream_options.include_usage), chat completions (plain and streamed,
// n = 2), the errors it raises for bad requests, and vLLM's /tokenize, /detokenize and /version.
// Usage: MCSERVE_URL=http://host:port MCSERVE_OPENAI_MODULES=<node_modules> node client.cjs
"use strict";
const assert = require("node:assert/strict");
const path = require("node:path");

const openaiModule = require(path.join(process.env.MCSERVE_OPENAI_MODULES, "openai"));
const OpenAI = openaiModule.OpenAI || openaiModule.default || openaiModule;
const baseURL = process.env.MCSERVE_URL;
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000 });
const model = "gated_deltanet";
const prompt = "In the beginning God created the heaven";
const greedy = { model, max_tokens: 6, temperature: 0, ignore_eos: true };
const messages = [{ role: "system", content: "Answer briefly." }, { role: "user", content: "In the beginning" }];

// Every chunk of a stream, in order.
async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function completions() {
  const plain = await client.completions.create({ ...greedy, prompt, n: 2, echo: true });
  assert.equal(plain.object, "text_completion");
  assert.equal(plain.model, model);
  assert.equal(plain.choices.length, 2);
  plain.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.ok(c.text.startsWith(prompt), `echo: ${JSON.stringify(c.text)}`);
    assert.equal(c.finish_reason, "length");
  });
  assert.equal(plain.choices[0].text, plain.choices[1].text);  // greedy: both samples alike
  assert.equal(plain.usage.completion_tokens, 12);
  assert.equal(plain.usage.total_tokens, plain.usage.prompt_tokens + 12);

  const chunks = await collect(await client.completions.create({
    ...greedy, prompt, stream: true, stream_options: { include_usage: true } }));
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, 6);
  const text = chunks.slice(0, -1).map((c) => c.choices[0].text).join("");
  assert.equal(prompt + text, plain.choices[0].text);
  assert.equal(chunks[chunks.length - 2].choices[0].finish_reason, "length");
  chunks.slice(0, -1).forEach((c) => assert.ok(c.usage === undefined || c.usage === null));
}

async function chat() {
  const plain = await client.chat.completions.create({ ...greedy, messages });
  assert.equal(plain.object, "chat.completion");
  assert.ok(plain.id.startsWith("chatcmpl-"));
  assert.equal(plain.choices.length, 1);
  assert.equal(plain.choices[0].message.role, "assistant");
  assert.equal(typeof plain.choices[0].message.content, "string");
  assert.equal(plain.choices[0].finish_reason, "length");
  assert.equal(plain.usage.completion_tokens, 6);

  const chunks = await collect(await client.chat.completions.create({
    ...greedy, messages, stream: true, stream_options: { include_usage: true } }));
  assert.equal(chunks[0].object, "chat.completion.chunk");
  assert.equal(chunks[0].choices[0].delta.role, "assistant");
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, plain.usage);
  const content = chunks.slice(0, -1).map((c) => c.choices[0].delta.content || "").join("");
  assert.equal(content, plain.choices[0].message.content);

  const two = await collect(await client.chat.completions.create({ ...greedy, messages, n: 2, stream: true }));
  for (const i of [0, 1]) {
    const mine = two.filter((c) => c.choices.length && c.choices[0].index === i);
    assert.equal(mine.map((c) => c.choices[0].delta.content || "").join(""), content);
    assert.equal(mine[mine.length - 1].choices[0].finish_reason, "length");
  }
}

async function errors() {
  for (const [request, field] of [
    [() => client.completions.create({ model, prompt, n: 0 }), "n: 0"],
    [() => client.completions.create({ model, prompt, n: 100 }), "n: 100"],
    [() => client.chat.completions.create({ model, messages: [{ role: "wizard", content: "x" }] }), "messages[0].role"],
    [() => client.completions.create({ model, prompt, stream_options: { include_usage: true } }), "stream_options"],
  ]) {
    await assert.rejects(request, (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${field}: ${e}`);
      assert.equal(e.status, 400);
      assert.ok(String(e.message).includes(field), `${field}: ${e.message}`);
      return true;
    });
  }
}

// vLLM's own routes (not in the openai package): plain fetch.
async function vllmRoutes() {
  const post = async (route, body) => {
    const r = await fetch(`${baseURL}${route}`, { method: "POST", body: JSON.stringify(body),
                                                headers: { "Content-Type": "application/json" } });
    assert.equal(r.status, 200, `${route}: ${r.status}`);
    return r.json();
  };
  const tokens = await post("/tokenize", { model, prompt });
  assert.equal(tokens.count, tokens.tokens.length);
  assert.ok(tokens.max_model_len > 0);
  assert.deepEqual(await post("/detokenize", { model, tokens: tokens.tokens }), { prompt });
  const chatTokens = await post("/tokenize", { model, messages });
  assert.ok(chatTokens.count > tokens.count);
  const version = await (await fetch(`${baseURL}/version`)).json();
  assert.equal(typeof version.version, "string");
}

(async () => {
  for (const [name, check] of [["completions", completions], ["chat", chat], ["errors", errors],
                               ["vllm routes", vllmRoutes]]) {
    await check();
    console.log(`ok ${name}`);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
