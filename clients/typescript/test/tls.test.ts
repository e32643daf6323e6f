/** TLS to the gateway: a CA made here with openssl, the server's certificate for 127.0.0.1, and the client trusting that CA by path or by PEM (or not). */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { Gateway, GatewayUnavailable } from "../src/index.js";
import { CATALOG, type Served, serve } from "./serve.js";

describe("TLS", () => {
  const folder = mkdtempSync(join(tmpdir(), "toolgate-tls-"));
  const openssl = (...args: string[]) => execFileSync("openssl", args, { cwd: folder, stdio: "ignore" });
  let served: Served;

  before(async () => {
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
      "-subj", "/CN=test CA", "-keyout", "ca.key", "-out", "ca.pem");
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=toolgate",
      "-keyout", "server.key", "-out", "server.csr");
    writeFileSync(join(folder, "san.ext"), "subjectAltName=IP:127.0.0.1\n");
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
      "-days", "1", "-extfile", "san.ext", "-out", "server.pem");
    writeFileSync(join(folder, "toolgate.yaml"), "tls: {cert: server.pem, key: server.key}\n");
    served = await serve(["--config", "toolgate.yaml", "--catalog", CATALOG], folder);
  });
  after(async () => served.stop());

  test("the CA as a path, as PEM bytes and as PEM text", async () => {
    const ca = join(folder, "ca.pem");
    for (const option of [ca, readFileSync(ca), readFileSync(ca, "utf8")]) {
      const gw = new Gateway(served.addr, { tls: { ca: option } });
      assert.deepEqual((await gw.execute("echo", { over: "tls" })).result, { over: "tls" });
      gw.close();
    }
  });

  test("a CA file that cannot be read is named", () => {
    assert.throws(
      () => new Gateway(served.addr, { tls: { ca: join(folder, "missing.pem") } }),
      /cannot read the TLS ca file .*missing\.pem/,
    );
  });

  test("plaintext to the TLS port is told it is one", async () => {
    const gw = new Gateway(served.addr, { timeout: 3000 });
    await assert.rejects(gw.execute("echo", {}), (err: Error) => {
      assert.ok(err instanceof GatewayUnavailable, String(err));
      assert.match(err.message, /this port speaks TLS/);
      return true;
    });
    gw.close();
  });
});
