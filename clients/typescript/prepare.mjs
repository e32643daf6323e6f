// Builds the client where npm installs it (`prepare`). Installed from a
// folder outside the project that installs it, npm links this folder
// without its build tools (the devDependencies): they are installed here
// first. Node.js 18 or newer is needed, and said plainly otherwise.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";

const MINIMUM = 18;
const major = Number(process.versions.node.split(".")[0]);
if (major < MINIMUM) {
  console.error(`@toolgate/client needs Node.js ${MINIMUM} or newer; this is Node.js ${process.versions.node}.`);
  process.exit(1);
}

const here = path.dirname(new URL(import.meta.url).pathname);
const require = createRequire(import.meta.url);
const has = (pkg) => {
  try {
    require.resolve(`${pkg}/package.json`);
    return true;
  } catch {
    return false;
  }
};
const npm = (args) => {
  // Run by npm, npm_execpath names npm's own script; else npm on the PATH.
  const [command, prefix] = process.env.npm_execpath ? [process.execPath, [process.env.npm_execpath]] : ["npm", []];
  execFileSync(command, [...prefix, ...args], { cwd: here, stdio: "inherit" });
};
const tools = ["@bufbuild/buf", "ts-proto", "typescript", "google-proto-files"];
if (!tools.every(has)) {
  npm(["install", "--include=dev", "--ignore-scripts", "--no-save", "--no-audit", "--no-fund"]);
}
npm(["run", "build"]);
