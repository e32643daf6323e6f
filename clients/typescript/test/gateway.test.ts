/** The client against the real gateway: every method, the errors a user meets, credentials, deadlines, cancellation. */

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";

import {
  AuthenticationError,
  Cancelled,
  DeadlineExceeded,
  Gateway,
  GatewayUnavailable,
  RateLimited,
  RequestError,
  ToolResolutionError,
  decodeMessage,
  outcomeOf,
  proto,
} from "../src/index.js";
import { API_KEY, CATALOG, gatewayForTests, serve, serveKeyed, signingKey, userToken } from "./serve.js";

const shared = gatewayForTests();

describe("Gateway", () => {
  test("addresses with and without a scheme", async () => {
    const plain = new Gateway(`http://${shared.served.addr}`);
    assert.ok((await plain.execute("echo", { a: 1 })).ok);
    plain.close();
    assert.throws(() => new Gateway(`grpc://${shared.served.addr}`), /expected host:port/);
  });

  test("resolve drops unknown names with suggestions", async () => {
    const found = await shared.gw.resolve(["support", "web_serch", "zzz"]);
    assert.deepEqual(found.tools.map((t) => t.name), ["track_parcel", "web_search"]);
    assert.deepEqual(found.unknown, ["web_serch", "zzz"]);
    assert.deepEqual(found.suggestions, { web_serch: ["web_search"], zzz: [] });
    assert.match(found.message, /Did you mean 'web_search'\?/);
  });

  test("strict resolve throws the unknown names in order, the message decoded", async () => {
    await assert.rejects(shared.gw.resolve(["web_serch", "track_parcel", "trak_parcel"], { strict: true }), (err: unknown) => {
      assert.ok(err instanceof ToolResolutionError);
      assert.deepEqual(err.unknown, ["web_serch", "trak_parcel"]);
      assert.deepEqual(err.suggestions, { web_serch: ["web_search"], trak_parcel: ["track_parcel"] });
      assert.equal(err.reason, "TOOL_NOT_FOUND");
      assert.match(err.message, /Did you mean 'web_search'\?/);
      assert.doesNotMatch(err.message, /%3F/);
      return true;
    });
    assert.equal(decodeMessage("Did you mean 'x'%3F 100%"), "Did you mean 'x'%3F 100%", "an invalid sequence is left as is");
    assert.equal(decodeMessage("Did you mean 'x'%3F"), "Did you mean 'x'?");
  });

  test("listTools as tools and in each provider's format", async () => {
    const tools = await shared.gw.listTools();
    const search = tools.find((t) => t.name === "web_search")!;
    assert.deepEqual(search.parameters.required, ["query"]);
    const openai = (await shared.gw.listTools({ names: ["support"], format: "openai" })) as { type: string; function: { name: string } }[];
    assert.deepEqual(openai.map((t) => t.function.name), ["track_parcel", "web_search"]);
    assert.equal(openai[0].type, "function");
    const anthropic = (await shared.gw.listTools({ names: ["web_search"], format: "anthropic" })) as { input_schema: { type: string } }[];
    assert.equal(anthropic[0].input_schema.type, "object");
    const mcp = (await shared.gw.listTools({ names: ["web_search"], format: "mcp" })) as { tools: { inputSchema: unknown }[] };
    assert.ok(mcp.tools[0].inputSchema);
    await assert.rejects(shared.gw.listTools({ format: "xml" as "mcp" }), /unknown format 'xml'/);
    await assert.rejects(shared.gw.listTools({ names: ["no_such_tool"] }), RequestError);
  });

  test("searchTools finds the tools for a task, best first", async () => {
    const found = await shared.gw.searchTools("where is my parcel");
    assert.equal(found[0].tool.name, "track_parcel");
    assert.ok(found[0].score > 0);
    assert.deepEqual(found.map((m) => m.score), [...found.map((m) => m.score)].sort((a, b) => b - a));
    assert.deepEqual((await shared.gw.searchTools("search the web", 1)).map((m) => m.tool.name), ["web_search"]);
    assert.deepEqual(await shared.gw.searchTools("quantum chromodynamics"), []);
    await assert.rejects(shared.gw.searchTools("   "), (err: Error) => err instanceof RequestError && /the query is empty/.test(err.message));
    await assert.rejects(shared.gw.searchTools("parcel", 51), /limit 51 is above 50/);
  });

  test("execute repairs and answers in band", async () => {
    const outcome = await shared.gw.execute("WebSearch", "```json\n{'query': 'rust',}\n```", { callId: "call_1" });
    assert.ok(outcome.ok);
    assert.equal(outcome.tool, "web_search");
    assert.equal(outcome.callId, "call_1");
    assert.deepEqual(outcome.repairs.map((r) => r.kind), ["TOOL_NAME", "ARGUMENTS_JSON"]);
    assert.deepEqual(outcome.result, { query: "rust" });
    const wrong = await shared.gw.execute("track_parcel", { code: "XX-1" });
    assert.equal(wrong.error?.kind, "INVALID_ARGUMENTS");
    assert.equal(wrong.content, wrong.error?.message);
    assert.equal(wrong.error?.violations[0].field, "/code");
    const unknown = await shared.gw.execute("launch_rocket", "{}", { tools: ["support"] });
    assert.deepEqual(unknown.error?.availableTools, ["track_parcel", "web_search"]);
    const dry = await shared.gw.execute("web_search", { query: "x" }, { dryRun: true });
    assert.ok(dry.ok && dry.resultJson === "" && dry.result === undefined);
  });

  test("arguments that are not JSON fail before any call", async () => {
    await assert.rejects(shared.gw.execute("web_search", { limit: 10n }), /not JSON-serialisable: a BigInt/);
    await assert.rejects(shared.gw.execute("web_search", { limit: Number.NaN }), /not JSON-serialisable: NaN/);
  });

  test("executeAll runs at once and answers in order", async () => {
    const started = Date.now();
    const outcomes = await shared.gw.executeAll([
      { tool: "nap", arguments: "{}", callId: "a" },
      { tool: "web_search", arguments: { query: "q" }, callId: "b" },
      { tool: "nap", callId: "c" },
    ]);
    assert.ok(Date.now() - started < 1900, "the naps ran together");
    assert.deepEqual(outcomes.map((o) => o.callId), ["a", "b", "c"]);
    assert.deepEqual(outcomes.map((o) => o.result), ["rested", { query: "q" }, "rested"]);
  });

  test("a gateway that is down is named", async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const down = new Gateway(`127.0.0.1:${port}`, { timeout: 2000 });
    await assert.rejects(down.execute("echo", "{}"), (err: unknown) => {
      assert.ok(err instanceof GatewayUnavailable);
      assert.match(err.message, new RegExp(`cannot reach the gateway at 127.0.0.1:${port}`));
      return true;
    });
    down.close();
  });

  test("deadlines: the gateway answers in band; a silent peer is the client's", async () => {
    const late = await shared.gw.execute("nap", "{}", { timeout: 500 });
    assert.equal(late.error?.kind, "TIMEOUT");
    const sockets: import("node:net").Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket)).listen(0, "127.0.0.1");
    await new Promise((r) => silent.once("listening", r));
    const { port } = silent.address() as { port: number };
    const stuck = new Gateway(`127.0.0.1:${port}`);
    await assert.rejects(stuck.execute("echo", "{}", { timeout: 500 }), DeadlineExceeded);
    stuck.close();
    sockets.forEach((s) => s.destroy());
    silent.close();
  });

  test("an aborted call is cancelled and the gateway serves on", async () => {
    const controller = new AbortController();
    const running = shared.gw.execute("nap", "{}", { signal: controller.signal });
    setTimeout(() => controller.abort(), 200);
    await assert.rejects(running, Cancelled);
    assert.ok((await shared.gw.execute("echo", "{}")).ok);
  });

  test("credentials travel as metadata", async () => {
    const keyed = await serveKeyed();
    try {
      const allowed = new Gateway(keyed.addr, { apiKey: API_KEY });
      assert.ok((await allowed.execute("echo", { a: 1 })).ok);
      assert.equal((await allowed.execute("whoami")).result, "");
      const refused = new Gateway(keyed.addr, { apiKey: "wrong" });
      await assert.rejects(refused.execute("echo", "{}"), AuthenticationError);
      const forUser = new Gateway(keyed.addr, { apiKey: API_KEY, userToken: userToken(signingKey.privateKey, "user-7") });
      assert.equal((await forUser.execute("whoami")).result, "user-7", "the tool learns who the call is for");
      const forged = userToken(generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey, "admin");
      const forger = new Gateway(keyed.addr, { apiKey: API_KEY, userToken: forged });
      await assert.rejects(forger.execute("whoami"), AuthenticationError);
      for (const g of [allowed, refused, forUser, forger]) g.close();
    } finally {
      await keyed.stop();
    }
  });

  test("values from a newer gateway are kept", () => {
    const outcome = outcomeOf(
      proto.ExecuteResponse.decode(
        proto.ExecuteResponse.encode({
          ok: false,
          tool: "",
          repairs: [{ kind: 17 as proto.RepairKind, original: "a", repaired: "b" }],
          argumentsJson: "",
          resultJson: "",
          error: { kind: 42 as proto.ErrorKind, message: "new", retryable: false, suggestions: [], availableTools: [], availableToolsTotal: 0, violations: [] },
          replayed: false,
          callId: "",
        }).finish(),
      ),
    );
    assert.equal(outcome.error?.kind, "ERROR_KIND_42");
    assert.equal(outcome.repairs[0].kind, "REPAIR_KIND_17");
    assert.equal(outcome.content, "new");
  });

  test("rate limits: RATE_LIMITED in band with retryAfter, RESOURCE_EXHAUSTED as RateLimited", async () => {
    const dir = mkdtempSync(join(tmpdir(), "toolgate-rate-"));
    writeFileSync(
      join(dir, "toolgate.yaml"),
      "rate_limits:\n  principal: {per_minute: 3, burst: 3}\n  tools:\n    echo: {per_minute: 2, per: all}\n",
    );
    const served = await serve(["--config", "toolgate.yaml", "--catalog", CATALOG], dir);
    const gw = new Gateway(served.addr);
    try {
      assert.ok((await gw.execute("echo", { a: 1 })).ok);
      assert.ok((await gw.execute("echo", { a: 2 })).ok);
      const limited = await gw.execute("echo", { a: 3 });
      assert.equal(limited.error?.kind, "RATE_LIMITED");
      assert.ok(limited.error?.retryable);
      assert.ok(limited.retryAfter !== undefined && limited.retryAfter > 0 && limited.retryAfter <= 30, `${limited.retryAfter}`);
      assert.match(limited.content, /try again in/);
      await assert.rejects(gw.execute("echo", { a: 4 }), (err: unknown) => {
        assert.ok(err instanceof RateLimited);
        assert.equal(err.code, 8);
        assert.ok(err.retryAfter !== undefined && err.retryAfter > 0);
        return true;
      });
    } finally {
      gw.close();
      await served.stop();
    }
  });
});
