/**
 * Providers' tool-call shapes to Execute, and outcomes back to their
 * tool-result messages:
 * - OpenAI Chat Completions: `{id, type: "function", function: {name, arguments}}`
 *   in, `{role: "tool", tool_call_id, content}` out;
 * - OpenAI Responses API: `{type: "function_call", call_id, name, arguments}`
 *   in, `{type: "function_call_output", call_id, output}` out;
 * - Anthropic Messages: `{type: "tool_use", id, name, input}` in,
 *   `{type: "tool_result", tool_use_id, content, is_error}` out.
 * A shape that is none of these throws a TypeError naming what was expected.
 */

/** One tool call as the model emitted it. */
export interface Call {
  tool: string;
  /** A string exactly as emitted, or an object (serialised to JSON). */
  arguments?: unknown;
  callId?: string;
}

/** What the adapters need of an Outcome. */
interface Answered {
  ok: boolean;
  content: string;
}

const OPENAI = "an OpenAI tool_calls item {id, type: 'function', function: {name, arguments}}";
const RESPONSES = "an OpenAI Responses item {type: 'function_call', call_id, name, arguments}";
const ANTHROPIC = "an Anthropic content block {type: 'tool_use', id, name, input}";

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= 120 ? text : `${text.slice(0, 117)}...`;
}

function field(item: unknown, key: string, expected: string): unknown {
  if (typeof item !== "object" || item === null || !(key in item)) {
    throw new TypeError(`expected ${expected}; got ${shown(item)} (no '${key}')`);
  }
  return (item as Record<string, unknown>)[key];
}

function text(item: unknown, key: string, expected: string): string {
  const value = field(item, key, expected);
  if (typeof value !== "string") throw new TypeError(`expected ${expected}; its '${key}' is ${typeof value}, not a string`);
  return value;
}

export function fromOpenAI(toolCall: unknown): Call {
  const fn = field(toolCall, "function", OPENAI);
  return { tool: text(fn, "name", OPENAI), arguments: (fn as { arguments?: unknown }).arguments, callId: text(toolCall, "id", OPENAI) };
}

export function toOpenAI(outcome: Answered, callId = "") {
  return { role: "tool" as const, tool_call_id: callId, content: outcome.content };
}

export function fromResponses(item: unknown): Call {
  const type = field(item, "type", RESPONSES);
  if (type !== "function_call") throw new TypeError(`expected ${RESPONSES}; got an item of type '${String(type)}'`);
  return { tool: text(item, "name", RESPONSES), arguments: (item as { arguments?: unknown }).arguments, callId: text(item, "call_id", RESPONSES) };
}

export function toResponses(outcome: Answered, callId = "") {
  return { type: "function_call_output" as const, call_id: callId, output: outcome.content };
}

export function fromAnthropic(block: unknown): Call {
  const type = field(block, "type", ANTHROPIC);
  if (type !== "tool_use") throw new TypeError(`expected ${ANTHROPIC}; got a block of type '${String(type)}'`);
  const input = field(block, "input", ANTHROPIC);
  if (typeof input !== "object" && typeof input !== "string") throw new TypeError(`expected ${ANTHROPIC}; its 'input' is ${typeof input}`);
  return { tool: text(block, "name", ANTHROPIC), arguments: input, callId: text(block, "id", ANTHROPIC) };
}

export function toAnthropic(outcome: Answered, callId = "") {
  return { type: "tool_result" as const, tool_use_id: callId, content: outcome.content, is_error: !outcome.ok };
}
