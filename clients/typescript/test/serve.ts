/** The real `toolgate` binary on a free port, for the client's tests. */

import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const REPO = fileURLToPath(new URL("../../../../", import.meta.url));
export const CATALOG = join(REPO, "clients/testdata/catalog.yaml");
export const API_KEY = "test-key-for-the-typescript-client";

export function binary(): string {
  const path = process.env.TOOLGATE_BIN ?? join(REPO, "target/debug/toolgate");
  if (!existsSync(path)) throw new Error(`no toolgate binary at ${path}: build it (cargo build) or set TOOLGATE_BIN`);
  return path;
}

export interface Served {
  addr: string;
  stop(): Promise<void>;
}

/** `toolgate serve --listen 127.0.0.1:0 ARGS` in `cwd`, once it listens. */
export function serve(args: string[], cwd = REPO): Promise<Served> {
  const child: ChildProcess = spawn(binary(), ["serve", "--listen", "127.0.0.1:0", ...args], { cwd, stdio: ["ignore", "ignore", "pipe"] });
  const log: string[] = [];
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stderr! });
    lines.on("line", (line) => {
      log.push(line);
      const at = line.indexOf("toolgate listening on ");
      if (at >= 0) {
        const addr = line.slice(at + "toolgate listening on ".length).split(" ")[0];
        resolve({
          addr,
          stop: () => new Promise<void>((done) => {
            child.once("exit", () => done());
            child.kill("SIGTERM");
          }),
        });
      }
    });
    child.once("exit", (code) => reject(new Error(`toolgate exited (${code}) before listening:\n${log.join("\n")}`)));
  });
}

/** A gateway that needs an API key (principal `agent`, every tool). */
export function serveKeyed(): Promise<Served> {
  const folder = mkdtempSync(join(tmpdir(), "toolgate-ts-"));
  const digest = createHash("sha256").update(API_KEY).digest("hex");
  writeFileSync(join(folder, "toolgate.yaml"), `principals:\n  - name: agent\n    api_key_sha256: ${digest}\n    tools: ['*']\n`);
  return serve(["--config", "toolgate.yaml", "--catalog", CATALOG], folder);
}
