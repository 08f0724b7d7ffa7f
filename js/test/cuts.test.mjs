// Real connection losses: the repository's cutting proxy between the
// client and the real Go server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { openProcess, SandboxOperationFailed } from "../dist/index.js";
import { startServer, startCutProxy, readAll, req, instance, pattern, writeAll } from "./helpers.mjs";

let srv;
let proxy;
before(async () => {
  srv = await startServer(["--grace", "60s"]);
  proxy = await startCutProxy(srv.addr);
});
after(async () => {
  await proxy?.stop();
  await srv?.stop();
});

test("20 cuts during a 64 MiB stream through cat: byte-exact, one exit", async () => {
  const url = `ws://${proxy.addr}/`;
  const p = await openProcess(url, instance("cuts"), req("cat"), { reconnectMin: 10, reconnectMax: 200 });
  const data = pattern(64 << 20, 3);
  // About 170 MiB cross the proxy (base64, both directions): a cut every
  // 6 MiB of it gives 20 cuts well inside the stream.
  const counts = Array.from({ length: 20 }, (_, i) => (i + 1) * 6 * (1 << 20));
  await proxy.cmd("cutat " + counts.join(" "));
  const [, out] = await Promise.all([writeAll(p.input, data), readAll(p.output)]);
  assert.equal(await proxy.cmd("wait 20"), "cuts 20");
  assert.equal(out.length, data.length);
  assert.ok(out.equals(data), "output differs from input");
  const exit = await p.wait();
  assert.deepEqual(exit, { code: 0 });
  assert.equal(await p.wait(), exit, "one exit");
  assert.ok(p.progress().connections >= 21, `connections ${p.progress().connections}`);
  await p.destroy();
});

test("a cut while nothing flows is resumed; stdin written during the loss arrives once", async () => {
  const url = `ws://${proxy.addr}/`;
  const p = await openProcess(url, instance("cut1"), req("cat"), { reconnectMin: 10, reconnectMax: 200 });
  const w = p.input.getWriter();
  const r = p.output.getReader();
  await w.write(Buffer.from("one\n"));
  assert.equal(Buffer.from((await r.read()).value).toString(), "one\n");
  await proxy.cmd("cutall");
  await w.write(Buffer.from("two\n"));
  await w.close();
  let rest = "";
  for (;;) {
    const { value, done } = await r.read();
    if (done) break;
    rest += Buffer.from(value).toString();
  }
  assert.equal(rest, "two\n");
  assert.deepEqual(await p.wait(), { code: 0 });
  assert.ok(p.progress().connections >= 2);
  await p.destroy();
});

test("destroy is bounded when the server cannot be reached", async () => {
  const url = `ws://${proxy.addr}/`;
  const p = await openProcess(url, instance("unreach"), req("sleep", "600"), { reconnectMin: 10, reconnectMax: 100, destroyTimeout: 1500 });
  await proxy.cmd("refuse true");
  try {
    await proxy.cmd("cutall");
    const t0 = Date.now();
    await assert.rejects(p.destroy(), (e) => e instanceof SandboxOperationFailed && e.operation === "destroy_process" && e.reason === "timed_out");
    assert.ok(Date.now() - t0 < 60_000, "bounded");
    assert.equal(p.destroy(), p.destroy(), "the same promise");
  } finally {
    await proxy.cmd("refuse false");
  }
  // The process stays on the server until its grace runs out or the
  // server shuts down at the end of this file, which destroys it.
});
