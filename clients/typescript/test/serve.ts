/** The real `toolgate` binary on a free port, for the client's tests. */

import { type ChildProcess, spawn } from "node:child_process";
import { after, before } from "node:test";
import { type KeyObject, createHash, generateKeyPairSync, sign } from "node:crypto";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { Gateway } from "../src/index.js";

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

const ISSUER = "https://idp.test";

/** The identity provider's key: end users' tokens are signed with it. */
export const signingKey = generateKeyPairSync("ec", { namedCurve: "P-256" });

/** An ES256 token for `subject`, signed with `key`. */
export function userToken(key: KeyObject, subject: string): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const claims = { sub: subject, iss: ISSUER, aud: "toolgate", exp: Math.floor(Date.now() / 1000) + 300 };
  const signed = `${part({ alg: "ES256", typ: "JWT", kid: "test-key" })}.${part(claims)}`;
  const signature = sign("sha256", Buffer.from(signed), { key, dsaEncoding: "ieee-p1363" });
  return `${signed}.${signature.toString("base64url")}`;
}

/** A gateway that needs an API key (principal `agent`, every tool) and verifies end users' tokens. */
export function serveKeyed(): Promise<Served> {
  const folder = mkdtempSync(join(tmpdir(), "toolgate-ts-"));
  const digest = createHash("sha256").update(API_KEY).digest("hex");
  const jwk = { ...signingKey.publicKey.export({ format: "jwk" }), kid: "test-key", alg: "ES256", use: "sig" };
  writeFileSync(join(folder, "jwks.json"), JSON.stringify({ keys: [jwk] }));
  writeFileSync(
    join(folder, "toolgate.yaml"),
    `principals:\n  - name: agent\n    api_key_sha256: ${digest}\n    tools: ['*']\n` +
      `users:\n  jwt: {issuer: '${ISSUER}', audience: toolgate, jwks_file: jwks.json}\n`,
  );
  return serve(["--config", "toolgate.yaml", "--catalog", CATALOG], folder);
}

/** For one test file: the gateway on the test catalogue, started before its tests and stopped after; the fields are set once `before` ran. */
export function gatewayForTests(): { served: Served; gw: Gateway } {
  const shared = {} as { served: Served; gw: Gateway };
  before(async () => {
    shared.served = await serve(["--catalog", CATALOG]);
    shared.gw = new Gateway(shared.served.addr);
  });
  after(async () => {
    shared.gw.close();
    await shared.served.stop();
  });
  return shared;
}
