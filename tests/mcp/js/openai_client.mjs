// The `openai` TypeScript SDK against the model door: one chat completion
// with a get_weather tool, whole or streamed (the deltas put together as
// the SDK's own helper does); prints what the SDK handed back as one JSON
// line.
import OpenAI from "openai";

const [baseURL, model, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "sk-test-caller", maxRetries: 0 });
const tools = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const messages = [{ role: "user", content: "Weather in Paris?" }];
try {
  let message, finish;
  if (mode === "whole") {
    const completion = await client.chat.completions.create({ model, messages, tools });
    message = completion.choices[0].message;
    finish = completion.choices[0].finish_reason;
  } else {
    const stream = client.chat.completions.stream({ model, messages, tools });
    const completion = await stream.finalChatCompletion();
    message = completion.choices[0].message;
    finish = completion.choices[0].finish_reason;
  }
  const calls = (message.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) }));
  console.log(JSON.stringify({ content: message.content, tool_calls: calls, finish_reason: finish }));
} catch (err) {
  console.log(JSON.stringify({ error: err.constructor.name, message: String(err.message) }));
}
