// A destroy the server could not complete (PROTOCOL.md §4.5): against
// internal/cmd/stubbornserve, whose processes fail their first destroy with
// processes_survived as when a member of the containment outlived SIGKILL.
// The error comes back at once, nothing is settled, the handle goes on, and
// destroy() again tries again.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { openProcess, Destroyed, SandboxOperationFailed } from "../dist/index.js";
import { startStubbornServer, startCutProxy, req, instance } from "./helpers.mjs";

let srv;
let proxy;
before(async () => {
  srv = await startStubbornServer(["-grace", "60s"]);
  proxy = await startCutProxy(srv.addr);
});
after(async () => {
  await proxy?.stop();
  await srv?.stop();
});

// The bound is a minute: the error must come back well before it.
const DESTROY_TIMEOUT = 60_000;

function survived(e) {
  assert.ok(e instanceof SandboxOperationFailed, `${e}`);
  assert.equal(e.operation, "destroy_process");
  assert.equal(e.reason, "processes_survived");
  return true;
}

// echo writes line on w and reads it back from r.
async function echo(w, r, line) {
  await w.write(new TextEncoder().encode(line));
  let got = "";
  while (!got.endsWith("\n")) {
    const { value, done } = await r.read();
    assert.ok(!done, `output ended after ${JSON.stringify(got)}`);
    got += Buffer.from(value).toString();
  }
  assert.equal(got, line);
}

test("a destroy the server could not complete rejects at once; the handle goes on in the session; destroy() again settles", async () => {
  const p = await openProcess(srv.url, instance("stubborn"), req("cat"), { destroyTimeout: DESTROY_TIMEOUT });
  const w = p.input.getWriter();
  const r = p.output.getReader();
  await echo(w, r, "before\n");
  const pending = r.read(); // held through the failed destroy, not failed by it

  const t0 = Date.now();
  const a = p.destroy();
  const b = p.destroy();
  assert.equal(a, b, "one attempt, one promise");
  const [ea, eb] = await Promise.allSettled([a, b]);
  assert.equal(ea.status, "rejected");
  survived(ea.reason);
  assert.equal(eb.reason, ea.reason, "both callers get the same rejection");
  assert.ok(Date.now() - t0 < DESTROY_TIMEOUT / 2, `the error, not destroyTimeout: ${Date.now() - t0} ms`);

  // The process still runs, and the handle still drives it, on the same connection.
  await w.write(new TextEncoder().encode("still here\n"));
  const { value, done } = await pending;
  assert.ok(!done);
  assert.equal(Buffer.from(value).toString(), "still here\n");
  await echo(w, r, "and again\n");
  assert.equal(p.progress().connections, 1, "the connection stayed up");

  // A later destroy() is a new attempt, and this one settles.
  const c = p.destroy();
  assert.notEqual(c, a, "a new attempt");
  await c;
  assert.equal(p.destroy(), c, "settled: the same promise");
  await p.destroy();
  await assert.rejects(r.read(), Destroyed);
  await assert.rejects(p.signal("SIGTERM"), Destroyed);
});

test("a destroy the server could not complete as the first frame of a new connection rejects; the handle resumes the process; destroy() again settles", async () => {
  const url = `ws://${proxy.addr}/`;
  const p = await openProcess(url, instance("stubborn-new"), req("cat"), {
    destroyTimeout: DESTROY_TIMEOUT,
    reconnectMin: 10,
    reconnectMax: 100,
  });
  const w = p.input.getWriter();
  const r = p.output.getReader();
  await echo(w, r, "before\n");

  await proxy.cmd("refuse true");
  const accepted = Number((await proxy.cmd("accepted")).split(" ")[1]);
  let d;
  try {
    assert.equal(await proxy.cmd("cutall"), "cut 1");
    d = p.destroy(); // goes out as the first frame of a new connection
  } finally {
    await proxy.cmd("refuse false");
  }
  const t0 = Date.now();
  await assert.rejects(d, survived);
  assert.ok(Date.now() - t0 < DESTROY_TIMEOUT / 2, `the error, not destroyTimeout: ${Date.now() - t0} ms`);

  // The handle resumes the process, which still runs.
  await echo(w, r, "resumed\n");
  assert.ok(p.progress().connections >= 2, `connections ${p.progress().connections}`);
  const after = Number((await proxy.cmd("accepted")).split(" ")[1]);
  assert.ok(after >= accepted + 2, `a destroy connection and a resume: accepted ${accepted} then ${after}`);

  await p.destroy();
  await assert.rejects(r.read(), Destroyed);
});
