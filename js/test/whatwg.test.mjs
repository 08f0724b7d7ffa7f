// The client over a WHATWG WebSocket class (no headers, no WebSocket
// pings), in a child Node with the experimental global WebSocket: bytes
// through cat, the token as a subprotocol, and a dead link noticed by
// application-level pings within two heartbeats, then resumed.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { startServer, startCutProxy } from "./helpers.mjs";

const TOKEN = "whatwg-token-0123456789";
const HEARTBEAT = 1000;
let srv;
let tsrv;
let proxy;
let dir;
before(async () => {
  srv = await startServer();
  dir = mkdtempSync(join(tmpdir(), "procwire-js-whatwg-"));
  writeFileSync(join(dir, "token"), TOKEN, { mode: 0o600 }); // serve refuses a token file others can read
  tsrv = await startServer(["--token-file", join(dir, "token"), "--heartbeat", `${HEARTBEAT}ms`, "--grace", "60s"]);
  proxy = await startCutProxy(tsrv.addr);
});
after(async () => {
  await proxy?.stop();
  await srv?.stop();
  await tsrv?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("a WHATWG WebSocket class carries 3 MiB through cat byte-exact", async () => {
  const child = fileURLToPath(new URL("whatwg-child.mjs", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, ["--experimental-websocket", "--no-warnings", child, srv.url]);
  assert.deepEqual(JSON.parse(stdout), { n: 3 << 20, same: true, exit: { code: 0 } });
});

test("WHATWG: the token travels as a subprotocol; a frozen link is dropped within two heartbeats by application pings, and resumed", { timeout: 90_000 }, async () => {
  const script = fileURLToPath(new URL("whatwg-dead-child.mjs", import.meta.url));
  const child = spawn(process.execPath, ["--experimental-websocket", "--no-warnings", script, `ws://${proxy.addr}/`, TOKEN], { stdio: ["pipe", "pipe", "inherit"] });
  const out = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const exited = new Promise((r) => child.on("exit", r));
  try {
    assert.equal((await out.next()).value, "ready");
    await proxy.freeze();
    child.stdin.write("frozen\n");
    const dropped = Number((await out.next()).value.replace(/^dropped /, ""));
    // Dead within two heartbeats: no frame within heartbeat_ms after a ping
    // sent every heartbeat/2 (plus a margin for a shared machine).
    assert.ok(dropped <= 2 * HEARTBEAT + 500, `dropped after ${dropped} ms, heartbeat ${HEARTBEAT} ms`);
    proxy.thaw();
    child.stdin.end("thawed\n");
    const result = JSON.parse((await out.next()).value);
    assert.equal(result.first, "one\n");
    assert.equal(result.second, "two\n");
    assert.deepEqual(result.exit, { code: 0 });
    assert.ok(result.connections >= 2, "resumed");
    assert.equal(result.protocols.length, 2);
    assert.equal(result.protocols[0], "procwire.v1");
    assert.equal(result.protocols[1], "procwire.bearer." + Buffer.from(TOKEN).toString("base64url"));
    assert.equal(await exited, 0);
  } finally {
    proxy.thaw();
    child.kill();
  }
});
