// Generates gen/ from ../../proto and google/rpc's status and error details
// with buf and ts-proto. The dependencies are found wherever npm put them:
// in this package's node_modules (npm ci here) or hoisted to the
// repository's (npm install ./clients/typescript at the root).
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(import.meta.url);
const here = path.dirname(new URL(import.meta.url).pathname);
const bin = (pkg, name) => path.join(path.dirname(require.resolve(`${pkg}/package.json`)), name);
const buf = bin("@bufbuild/buf", "bin/buf");
const plugin = bin("ts-proto", "protoc-gen-ts_proto");
const googleProtos = path.relative(here, path.dirname(require.resolve("google-proto-files/package.json")));
const template = JSON.stringify({
  version: "v2",
  plugins: [
    {
      local: plugin,
      out: "gen",
      opt: ["outputServices=grpc-js", "esModuleInterop=true", "env=node", "importSuffix=.js", "useOptionals=messages"],
    },
  ],
});
const run = (args) => execFileSync(process.execPath, [buf, ...args], { cwd: here, stdio: "inherit" });
run(["generate", "../../proto", "--template", template]);
run([
  "generate", googleProtos,
  "--path", path.join(googleProtos, "google/rpc/status.proto"),
  "--path", path.join(googleProtos, "google/rpc/error_details.proto"),
  "--template", template,
]);
