// compress: s2-compressed stdout and stderr from the real Go server,
// inflated by the client; every count stays in raw bytes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { openProcess } from "../dist/index.js";
import { startServer, startCutProxy, readAll, req, instance, writeAll } from "./helpers.mjs";

let srv;
let plain;
let proxy;
before(async () => {
  srv = await startServer(["--grace", "60s"]);
  plain = await startServer(["--no-compression"]);
  proxy = await startCutProxy(srv.addr);
});
after(async () => {
  await proxy?.stop();
  await srv?.stop();
  await plain?.stop();
});

const LINE = '{"jsonrpc":"2.0","method":"session/update","params":{"text":"compressible"}}';

// lines runs `yes LINE | head -c n`, to stderr with toStderr.
function lines(n, toStderr = false) {
  return req("sh", "-c", `yes '${LINE}' | head -c ${n}${toStderr ? " >&2" : ""}`);
}

function expected(n) {
  return Buffer.from((LINE + "\n").repeat(Math.ceil(n / (LINE.length + 1)))).subarray(0, n);
}

test("8 MiB of NDJSON with compress: byte-exact, and the server compressed it", async () => {
  const n = 8 << 20;
  const p = await openProcess(srv.url, instance("s2"), lines(n), { compress: true });
  const out = await readAll(p.output);
  assert.equal(out.length, n);
  assert.ok(out.equals(expected(n)), "output differs");
  assert.deepEqual(await p.wait(), { code: 0 });
  const pr = p.progress();
  assert.equal(pr.stdoutReceived, n, "offsets count raw bytes");
  assert.equal(pr.stdoutRead, n);
  assert.ok(pr.framesInflated > 0, `framesInflated ${pr.framesInflated}`);
  await p.destroy();
});

test("compressed stderr is inflated too", async () => {
  const n = 32 << 10;
  const p = await openProcess(srv.url, instance("s2err"), lines(n, true), { compress: true });
  const [out, err] = await Promise.all([readAll(p.output), readAll(p.error)]);
  assert.equal(out.length, 0);
  assert.ok(err.equals(expected(n)), "stderr differs");
  assert.equal(p.errorDropped(), 0);
  assert.equal(p.progress().stderrReceived, n);
  assert.ok(p.progress().framesInflated > 0);
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
});

test("stdin stays raw with compress: cat echoes it byte-exact, the echo compressed", async () => {
  const n = 4 << 20;
  const p = await openProcess(srv.url, instance("s2cat"), req("cat"), { compress: true });
  const data = expected(n);
  const [, out] = await Promise.all([writeAll(p.input, data), readAll(p.output)]);
  assert.ok(out.equals(data), "output differs");
  assert.equal(p.progress().stdinWritten, n);
  assert.ok(p.progress().framesInflated > 0);
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
});

test("a cut during a compressed stream is resumed: byte-exact", async () => {
  const n = 8 << 20;
  const p = await openProcess(`ws://${proxy.addr}/`, instance("s2cut"), lines(n), { compress: true, reconnectMin: 10, reconnectMax: 200 });
  const r = p.output.getReader();
  const chunks = [];
  let got = 0;
  let cut = false;
  for (;;) {
    const { value, done } = await r.read();
    if (done) break;
    chunks.push(value);
    got += value.length;
    if (!cut && got >= 1 << 20) {
      cut = true;
      await proxy.cmd("cutall");
    }
  }
  assert.ok(cut, "the stream was cut");
  const out = Buffer.concat(chunks);
  assert.equal(out.length, n);
  assert.ok(out.equals(expected(n)), "output differs");
  assert.deepEqual(await p.wait(), { code: 0 });
  assert.ok(p.progress().connections >= 2, `connections ${p.progress().connections}`);
  assert.ok(p.progress().framesInflated > 0);
  await p.destroy();
});

test("no compression unless asked for, and none from a server with --no-compression", async () => {
  const n = 1 << 20;
  for (const [url, opts] of [[srv.url, {}], [plain.url, { compress: true }]]) {
    const p = await openProcess(url, instance("raw"), lines(n), opts);
    const out = await readAll(p.output);
    assert.ok(out.equals(expected(n)), "output differs");
    assert.equal(p.progress().framesInflated, 0);
    assert.deepEqual(await p.wait(), { code: 0 });
    await p.destroy();
  }
});
