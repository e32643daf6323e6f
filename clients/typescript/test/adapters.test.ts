/** Providers' tool-call shapes in, tool-result messages out, as the providers document them. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { fromAnthropic, fromOpenAI, fromResponses } from "../src/index.js";
import { gatewayForTests } from "./serve.js";

const shared = gatewayForTests();

test("OpenAI Chat Completions", async () => {
  const messages = await shared.gw.executeOpenAI([
    { id: "call_a", type: "function", function: { name: "WebSearch", arguments: '{"query": "rust"}' } },
    { id: "call_b", type: "function", function: { name: "track_parcel", arguments: '{"code": "nope"}' } },
  ]);
  assert.deepEqual(messages[0], { role: "tool", tool_call_id: "call_a", content: '{"query":"rust"}' });
  assert.deepEqual(Object.keys(messages[1]), ["role", "tool_call_id", "content"]);
  assert.match(messages[1].content, /^'code' must match/);
});

test("OpenAI Responses API", async () => {
  const output = [
    { type: "reasoning", id: "rs_1", summary: [] },
    { type: "function_call", id: "fc_1", call_id: "call_r", name: "web_search", arguments: '{"query": "x"}' },
    { type: "message", id: "msg_1", role: "assistant", content: [] },
  ];
  assert.deepEqual(await shared.gw.executeResponses(output), [{ type: "function_call_output", call_id: "call_r", output: '{"query":"x"}' }]);
});

test("Anthropic Messages", async () => {
  const message = await shared.gw.executeAnthropic([
    { type: "text", text: "Let me look." },
    { type: "tool_use", id: "toolu_1", name: "web_search", input: { query: "rust" } },
    { type: "tool_use", id: "toolu_2", name: "launch_rocket", input: {} },
  ]);
  assert.equal(message.role, "user");
  assert.deepEqual(message.content[0], { type: "tool_result", tool_use_id: "toolu_1", content: '{"query":"rust"}', is_error: false });
  assert.equal(message.content[1].is_error, true);
  assert.match(message.content[1].content, /^Tool 'launch_rocket' not found\./);
});

test("unexpected shapes say what was expected", () => {
  assert.throws(() => fromOpenAI({ id: "x", name: "echo" }), /expected an OpenAI tool_calls item .*\(no 'function'\)/);
  assert.throws(() => fromOpenAI({ id: "x", function: { name: 3 } }), /its 'name' is number, not a string/);
  assert.throws(() => fromResponses({ type: "message" }), /expected an OpenAI Responses item .*type 'message'/);
  assert.throws(() => fromAnthropic({ type: "tool_use", id: "t", name: "echo" }), /expected an Anthropic content block .*\(no 'input'\)/);
  assert.throws(() => fromAnthropic("not a block"), /expected an Anthropic content block/);
});
