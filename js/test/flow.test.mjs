// Flow control against the real Go server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as delay } from "node:timers/promises";
import { openProcess, SandboxLifecycleConflict } from "../dist/index.js";
import { startServer, readAll, req, instance } from "./helpers.mjs";

let srv;
before(async () => {
  srv = await startServer();
});
after(async () => {
  await srv?.stop();
});

// until polls cond: the client has no event for "the server stopped
// sending", so the test looks at the byte counts, under a generous bound.
async function until(cond, what, ms = 60_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out waiting for " + what);
    await delay(10);
  }
}

test("unread output holds the child at one window", async () => {
  const window = 64 * 1024;
  const total = 8 << 20;
  const p = await openProcess(srv.url, instance("unread"), req("head", "-c", String(total), "/dev/zero"), { stdoutWindow: window });
  await until(() => p.progress().stdoutReceived >= window, "a full window");
  // Observe a while: nothing beyond the window arrives (the client would
  // also end the handle with a protocol_violation if it did).
  await delay(500);
  assert.equal(p.progress().stdoutReceived, window);
  assert.equal(p.progress().stdoutRead, 0);
  const out = await readAll(p.output);
  assert.equal(out.length, total);
  assert.ok(out.every((b) => b === 0));
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
});

test("input backpressure: desiredSize goes non-positive while the child does not read", async () => {
  const p = await openProcess(srv.url, instance("bp"), req("sleep", "600"), { stdinWindow: 4096 });
  const w = p.input.getWriter();
  const pending = [];
  for (let i = 0; i < 8; i++) pending.push(w.write(new Uint8Array(64 * 1024)).then(() => undefined, (e) => e));
  // The server window and the pipe hold far less than 512 KiB: the queue fills.
  await until(() => w.desiredSize <= 0, "backpressure");
  assert.ok(p.progress().stdinWritten - p.progress().stdinReceived <= 4096 + 65536 * 2);
  await p.destroy();
  const results = await Promise.all(pending);
  assert.ok(results.some((e) => e instanceof SandboxLifecycleConflict && e.operation === "write_stdin" && e.actual === "process_destroyed"), "a blocked write ends with process_destroyed");
});

test("stderr is bounded: what was read plus errorDropped() is what the child wrote", async () => {
  const total = 1 << 20;
  const p = await openProcess(srv.url, instance("stderr"), req("sh", "-c", `head -c ${total} /dev/zero >&2`));
  assert.deepEqual(await p.wait(), { code: 0 });
  await readAll(p.output);
  const err = await readAll(p.error);
  assert.ok(p.errorDropped() > 0, "a 1 MiB burst overflows the 64 KiB ring");
  assert.equal(err.length + p.errorDropped(), total);
  await p.destroy();
});
