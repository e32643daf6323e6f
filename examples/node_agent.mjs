// An agent loop through toolgate, with a scripted model (no network, no API
// key) that drifts as models do. From the repository's root: run the gateway
// on the shipped catalogue (`cargo run --release -- serve --pack courier`),
// install the client once (`npm install ./clients/typescript`), then `node
// examples/node_agent.mjs`; TOOLGATE_ADDR overrides 127.0.0.1:50051.
import { Gateway } from "@toolgate/client";

const call = (name, args, n) => ({ id: `call_${n}`, type: "function", function: { name, arguments: args } });

// Plays the assistant: each reply reads the last tool result.
function scriptedModel(messages) {
  const results = messages.filter((m) => m.role === "tool").map((m) => m.content);
  if (results.length === 0) {
    // A CamelCase name and a fenced argument object.
    return { role: "assistant", tool_calls: [call("TrackParcel", '```json\n{"code": "PK-1001"}\n```', 1)] };
  }
  if (results.length === 1) {
    // Sunday is day 7; the model says 8.
    return { role: "assistant", tool_calls: [call("reschedule_delivery", '{"code": "PK-1001", "day": 8}', 2)] };
  }
  if (results.at(-1).includes("must be between 1 and 7")) {
    // Corrected from the gateway's message.
    return { role: "assistant", tool_calls: [call("reschedule_delivery", '{"code": "PK-1001", "day": 7}', 3)] };
  }
  return { role: "assistant", content: `Done: parcel PK-1001 now arrives on ${JSON.parse(results.at(-1)).due}.` };
}

const gateway = new Gateway(process.env.TOOLGATE_ADDR ?? "127.0.0.1:50051");
const messages = [{ role: "user", content: "Where is PK-1001? Deliver it on Sunday." }];
let finished = false;
for (let turn = 0; turn < 6 && !finished; turn++) {
  const reply = scriptedModel(messages);
  messages.push(reply);
  console.log(`assistant: ${reply.content ?? JSON.stringify(reply.tool_calls)}`);
  if (!reply.tool_calls) {
    finished = true;
    break;
  }
  for (const message of await gateway.executeOpenAI(reply.tool_calls, { sessionId: "demo-conversation" })) {
    messages.push(message);
    console.log(`tool:      ${message.content}`);
  }
}
gateway.close();
process.exit(finished ? 0 : 1);
