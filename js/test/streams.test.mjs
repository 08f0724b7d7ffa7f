// output and error as byte streams (BYOB readers), wake-ups that reach only
// the waiters a change concerns, and the token over a header, a subprotocol,
// and never in clear to a remote host.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openProcess, SandboxOperationFailed } from "../dist/index.js";
import { startServer, req, instance, pattern, writeAll } from "./helpers.mjs";

const TOKEN = "s3cret-token-for-the-js-tests+/=";
let srv;
let dir;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "procwire-js-token-"));
  writeFileSync(join(dir, "token"), TOKEN, { mode: 0o600 }); // serve refuses a token file others can read
  srv = await startServer(["--token-file", join(dir, "token")]);
});
after(async () => {
  await srv?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("a BYOB reader of output gets every byte, in views it chose, and consumes no more than it read", async () => {
  const data = pattern(3 << 20, 7);
  const p = await openProcess(srv.url, instance("byob"), req("cat"), { token: TOKEN, stdoutWindow: 64 << 10 });
  const writing = writeAll(p.input, data);
  const r = p.output.getReader({ mode: "byob" });
  const got = Buffer.alloc(data.length);
  let n = 0;
  let buf = new ArrayBuffer(1000);
  for (;;) {
    const { value, done } = await r.read(new Uint8Array(buf, 0, 1000));
    if (done) break;
    assert.ok(value.length <= 1000);
    got.set(value, n);
    n += value.length;
    assert.equal(p.progress().stdoutRead, n, "consumed exactly what was read");
    buf = value.buffer; // the view comes back, transferred
  }
  await writing;
  assert.equal(n, data.length);
  assert.ok(got.equals(data), "byte-exact");
  assert.deepEqual(await p.wait(), { code: 0 });
  // stderr is a byte stream too.
  assert.equal((await p.error.getReader({ mode: "byob" }).read(new Uint8Array(16))).done, true);
  await p.destroy();
});

test("a stdout frame wakes the output reader, not a writer waiting for credit", async () => {
  // sh never reads its stdin: a write past the pipe's buffer waits for
  // credit while 8 MiB of stdout flows by.
  const p = await openProcess(srv.url, instance("wake"), req("sh", "-c", "head -c 8388608 /dev/zero; sleep 600"), { token: TOKEN, stdinWindow: 1024, stdoutWindow: 64 << 10 });
  const w = p.input.getWriter();
  const pending = w.write(new Uint8Array(1 << 20));
  pending.catch(() => {});
  const r = p.output.getReader();
  const wakeups = () => p[Symbol.for("procwire.wakeups")]();
  let n = 0;
  let frames = 0;
  let before;
  while (n < 8 << 20) {
    if (before === undefined && n >= 1 << 20) {
      // By now the pipe is full and credit has stopped (what still comes is
      // counted below: each 1 KiB of credit may wake the writer).
      before = { ...wakeups(), received: p.progress().stdinReceived, frames };
    }
    const { value, done } = await r.read();
    assert.ok(!done);
    n += value.length;
    frames++;
  }
  const after = wakeups();
  const credits = Math.ceil((p.progress().stdinReceived - before.received) / 1024);
  const read = frames - before.frames;
  assert.ok(read > 20, `${read} reads`);
  assert.ok(after.out - before.out >= read / 2, `the reader was woken: ${JSON.stringify(after)}`);
  assert.ok(after.in - before.in <= credits + 2, `the blocked writer was woken ${after.in - before.in} times by ${read} stdout frames and ${credits} credits`);
  await p.destroy();
  await assert.rejects(pending);
});

test("the token as a subprotocol (tokenVia), as a header, refused when wrong, and never sent in clear to a remote host", async () => {
  for (const tokenVia of ["subprotocol", "header"]) {
    const p = await openProcess(srv.url, instance("tok"), req("true"), { token: TOKEN, tokenVia });
    assert.deepEqual(await p.wait(), { code: 0 });
    await p.destroy();
  }
  for (const tokenVia of ["subprotocol", "header"]) {
    await assert.rejects(
      openProcess(srv.url, instance("tok"), req("true"), { token: "wrong-token-wrong-token", tokenVia }),
      (e) => e instanceof SandboxOperationFailed && e.operation === "open_process" && e.reason === "unauthorized",
    );
  }
  await assert.rejects(openProcess("ws://192.0.2.1:7777/", "i", req("true"), { token: TOKEN }), TypeError);
  await assert.rejects(openProcess("ws://example.com/", "i", req("true"), { token: TOKEN }), /not loopback/);
});
