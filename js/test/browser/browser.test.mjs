// A real browser: Debian's chromium, headless, driven by playwright-core,
// loads a page bundling the TypeScript client (esbuild) from a loopback
// HTTP server of its own. Against `procwire serve --token-file` behind the
// repository's cutting proxy, the page streams 16 MiB through cat while
// the connection is cut three times, checks every byte, then signals and
// destroys. The token travels as the procwire.bearer subprotocol, never in
// a URL. Under CI=true a missing chromium fails the test instead of
// skipping it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { build as esbuild } from "esbuild";
import { CHROMIUM, openTab } from "./chromium.mjs";
import { startServer, startCutProxy, instance } from "../helpers.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const TOTAL = 16 << 20;
const CUTS = 3;

const missing = !existsSync(CHROMIUM);
if (missing && process.env.CI === "true") {
  test("chromium is installed (CI=true)", () => {
    assert.fail(`${CHROMIUM} is missing: .ci/run installs it with apt-get (package chromium)`);
  });
}

test("chromium streams 16 MiB through cat byte-exact across 3 cuts, then signals and destroys", { skip: missing && `${CHROMIUM} is missing (apt-get install chromium)`, timeout: 180_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "procwire-browser-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));

  // The page: the client bundled for the browser from its build (dist/).
  const bundle = await esbuild({
    entryPoints: [join(here, "page.mjs")],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: "chrome120",
    external: ["ws"],
    alias: { "@procwire/client": process.env.PROCWIRE_JS_DIST ?? join(here, "../../dist/index.js") },
    logLevel: "error",
  });
  const js = bundle.outputFiles[0].text;
  const http = createServer((req, res) => {
    if (req.url === "/") {
      res.writeHead(200, { "content-type": "text/html" });
      res.end('<!doctype html><meta charset="utf-8"><title>procwire</title><script type="module" src="/page.js"></script>');
    } else if (req.url === "/page.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(js);
    } else {
      res.writeHead(req.url === "/favicon.ico" ? 204 : 404).end();
    }
  });
  await new Promise((r) => http.listen(0, "127.0.0.1", r));
  t.after(() => {
    http.closeAllConnections(); // the browser's keep-alive connection would hold close() for minutes
    return new Promise((r) => http.close(r));
  });
  const page = `127.0.0.1:${http.address().port}`;

  // The server, with a token and the page's origin allowed, and the
  // cutting proxy in front of it.
  const token = randomBytes(24).toString("hex");
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, token, { mode: 0o600 });
  const srv = await startServer(["--token-file", tokenFile, "--allow-origin", page, "--grace", "30s"]);
  t.after(() => srv.stop());
  const proxy = await startCutProxy(srv.addr);
  t.after(() => proxy.stop());
  // Cuts spread over the run: the bytes through the proxy (both ways,
  // base64 and framing included) are about 2 × 4/3 × 16 MiB.
  await proxy.cmd("cutat 4000000 15000000 27000000");

  const { tab, logs } = await openTab(t, dir, `http://${page}/`);
  await tab.waitForFunction(() => window.procwireReady === true, null, { timeout: 30_000 });

  const t0 = performance.now();
  const r = await tab.evaluate((args) => window.procwireRun(args), {
    url: `ws://${proxy.addr}/`,
    token,
    instance: instance("browser"),
    total: TOTAL,
    chunk: 64 << 10,
  });
  const ms = performance.now() - t0;
  const cuts = Number((await proxy.cmd("cuts")).replace(/^cuts /, ""));

  assert.equal(r.mismatch, -1, `first wrong byte at ${r.mismatch}`);
  assert.equal(r.bytes, TOTAL);
  assert.equal(cuts, CUTS, "the proxy cut the connection three times");
  assert.ok(r.connections >= CUTS + 1, `${r.connections} connections: each cut was resumed`);
  assert.equal(r.delivered, true);
  assert.deepEqual(r.exit, { signal: "SIGTERM" });
  assert.ok(!srv.log().includes(token), "the token is never logged");
  console.log(
    `# browser: ${r.bytes} bytes byte-exact through cat, ${cuts} cuts, ${r.connections} connections, ` +
      `streamed in ${r.streamedMs} ms (${(r.bytes / 1048576 / (r.streamedMs / 1000)).toFixed(1)} MiB/s), ` +
      `signal+wait+destroy done at ${r.totalMs} ms, ${Math.round(ms)} ms in all; ${r.userAgent}`,
  );
  if (logs.length) console.log("# page console: " + logs.slice(0, 5).join(" | "));
});
