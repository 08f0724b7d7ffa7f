// The package as published: `npm pack`, the tarball unpacked into a fresh
// directory's node_modules (its one dependency, ws, linked from this
// checkout: no registry needed), then imported, required and used there.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startServer } from "./helpers.mjs";

const js = fileURLToPath(new URL("../", import.meta.url));
let dir;
let pkg;
let srv;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "procwire-pack-"));
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: js, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const [info] = JSON.parse(out);
  pkg = join(dir, "app", "node_modules", "@procwire", "client");
  mkdirSync(pkg, { recursive: true });
  execFileSync("tar", ["-xzf", join(dir, info.filename), "-C", pkg, "--strip-components=1"]);
  symlinkSync(join(js, "node_modules", "ws"), join(dir, "app", "node_modules", "ws"));
  srv = await startServer();
});
after(async () => {
  await srv?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the tarball holds LICENSE, README, the build with declarations and self-contained source maps", () => {
  assert.match(readFileSync(join(pkg, "LICENSE"), "utf8"), /^MIT License/);
  const manifest = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8"));
  assert.equal(manifest.license, "MIT");
  assert.match(manifest.dependencies.ws, /^\^/, "runtime dependencies as caret ranges");
  assert.equal(manifest.exports["."].default, "./dist/index.js");
  for (const f of ["index.js", "index.d.ts", "client.js", "client.d.ts", "errors.js", "frames.js", "transport.js"]) {
    assert.ok(existsSync(join(pkg, "dist", f)), f);
  }
  for (const f of readdirSync(join(pkg, "dist")).filter((f) => f.endsWith(".js.map"))) {
    const map = JSON.parse(readFileSync(join(pkg, "dist", f), "utf8"));
    assert.equal(map.sourcesContent?.length, map.sources.length, `${f}: sourcesContent`);
    assert.ok(map.sourcesContent.every((s) => typeof s === "string" && s.length > 0), f);
  }
  // README links resolve from the tarball: no relative link out of the package.
  const readme = readFileSync(join(pkg, "README.md"), "utf8");
  const links = [...readme.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]);
  for (const l of links) {
    assert.ok(/^(https?:|#)/.test(l) || existsSync(join(pkg, l.split("#")[0])), `README link ${l} does not resolve from the package`);
  }
});

test("imported and required in a fresh directory, it opens a process", () => {
  const app = join(dir, "app");
  const esm = `
    import { openProcess, contractError } from "@procwire/client";
    const p = await openProcess(process.argv[1], "pack-esm", { executable: "sh", arguments: ["-c", "exit 7"], working_directory: "/tmp", environment: {} });
    const exit = await p.wait();
    await p.destroy();
    console.log(JSON.stringify({ exit, tag: contractError("timed_out", "open_process")._tag }));`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", esm, srv.url], { cwd: app, encoding: "utf8" });
  assert.deepEqual(JSON.parse(out), { exit: { code: 7 }, tag: "SandboxOperationFailed" });
  // require() of the ESM build: Node >= 20.19 loads it through the
  // "default" condition.
  const cjs = `const m = require("@procwire/client"); console.log(typeof m.openProcess, m.SandboxOperationFailed.name);`;
  const got = execFileSync(process.execPath, ["-e", cjs], { cwd: app, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  assert.equal(got.trim(), "function SandboxOperationFailed");
});
