/** Agent loops against the real gateway: the shipped Node example, and a scripted model that keeps drifting until the gateway stops it. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";

import { Gateway } from "../src/index.js";
import { CATALOG, REPO, serve } from "./serve.js";

test("the Node example ends with the final answer", async () => {
  // The example imports the package by name, as a user's code would.
  const scope = join(REPO, "examples/node_modules/@toolgate");
  mkdirSync(scope, { recursive: true });
  rmSync(join(scope, "client"), { force: true, recursive: true });
  symlinkSync(join(REPO, "clients/typescript"), join(scope, "client"), "dir");
  const shipped = await serve(["--pack", "courier"]);
  try {
    const example = join(REPO, "examples/node_agent.mjs");
    const { stdout } = await promisify(execFile)(process.execPath, [example], {
      env: { ...process.env, TOOLGATE_ADDR: shipped.addr },
      timeout: 60_000,
    });
    const lines = stdout.trim().split("\n");
    assert.equal(lines.at(-1), "assistant: Done: parcel PK-1001 now arrives on Sunday.");
    assert.ok(lines.some((l) => l.includes("must be between 1 and 7, got 8")), stdout);
    assert.ok(readFileSync(example, "utf8").split("\n").length < 60);
  } finally {
    await shipped.stop();
  }
});

test("a model that keeps drifting is stopped by its retry budget", async () => {
  const served = await serve(["--catalog", CATALOG]);
  const gw = new Gateway(served.addr);
  try {
    const kinds: string[] = [];
    for (let attempt = 0; attempt < 10; attempt++) {
      const outcome = await gw.execute("track_parcel", '{"code": "parcel one"}', { sessionId: "drifting-session" });
      kinds.push(outcome.error?.kind ?? "OK");
      if (outcome.error?.kind === "RETRY_BUDGET_EXHAUSTED") {
        assert.equal(outcome.error.retryable, false);
        break;
      }
    }
    assert.deepEqual(kinds, ["INVALID_ARGUMENTS", "INVALID_ARGUMENTS", "INVALID_ARGUMENTS", "RETRY_BUDGET_EXHAUSTED"]);
  } finally {
    gw.close();
    await served.stop();
  }
});
