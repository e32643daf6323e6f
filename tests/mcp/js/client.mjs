// An MCP client of toolgate's front door, with the TypeScript reference SDK
// (@modelcontextprotocol/sdk): lists the tools and makes the calls named on
// the command line, printing one JSON line per answer for the Rust test.
//
//   client.mjs (--url URL | --stdio ARGV_JSON) [--header NAME=VALUE]... [--cwd DIR] CALL...
//
// CALL is NAME=ARGUMENTS_JSON, NAME=ARGUMENTS_JSON@KEY (with an
// idempotency key in _meta), or raw=PARAMS_JSON: a `tools/call` whose
// params are sent as written (malformed ones included).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");

function parse(argv) {
  const options = { headers: {}, calls: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "--url") options.url = argv[++i];
    else if (arg === "--stdio") options.stdio = JSON.parse(argv[++i]);
    else if (arg === "--cwd") options.cwd = argv[++i];
    else if (arg === "--header") {
      const [name, ...value] = argv[++i].split("=");
      options.headers[name] = value.join("=");
    } else options.calls.push(arg);
  }
  return options;
}

function callOf(spec) {
  const at = spec.indexOf("=");
  const name = spec.slice(0, at);
  let text = spec.slice(at + 1);
  let meta;
  if (!text.endsWith("}")) {
    const key = text.slice(text.lastIndexOf("@") + 1);
    text = text.slice(0, text.lastIndexOf("@"));
    meta = { "dev.toolgate/idempotency_key": key };
  }
  return { name, arguments: JSON.parse(text), ...(meta ? { _meta: meta } : {}) };
}

async function main() {
  const options = parse(process.argv.slice(2));
  const transport = options.url
    ? new StreamableHTTPClientTransport(new URL(options.url), { requestInit: { headers: options.headers } })
    : new StdioClientTransport({
        command: options.stdio[0],
        args: options.stdio.slice(1),
        cwd: options.cwd,
        stderr: "inherit",
      });
  const client = new Client({ name: "toolgate-tests", version: "1.0.0" });
  await client.connect(transport);
  say({ protocol_version: transport.protocolVersion ?? null, server: client.getServerVersion() });
  const { tools } = await client.listTools();
  say({ tools });
  for (const spec of options.calls) {
    if (spec.startsWith("raw=")) {
      const params = JSON.parse(spec.slice(4));
      try {
        say({ call: "raw", result: await client.request({ method: "tools/call", params }, CallToolResultSchema) });
      } catch (err) {
        say({ call: "raw", error: { code: err.code ?? null, message: err.message, data: err.data ?? null } });
      }
      continue;
    }
    const call = callOf(spec);
    try {
      say({ call: call.name, result: await client.callTool(call) });
    } catch (err) {
      say({ call: call.name, error: { code: err.code ?? null, message: err.message, data: err.data ?? null } });
    }
  }
  await client.close();
}

main().catch((err) => {
  say({ failed: String(err && err.stack ? err.stack : err) });
  process.exit(1);
});
