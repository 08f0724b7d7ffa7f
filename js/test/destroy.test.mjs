// A destroy the server could not complete (PROTOCOL.md §4.5): against
// internal/testkit/cmd/stubbornserve, whose processes fail their first destroy with
// processes_survived as when a member of the containment outlived SIGKILL.
// The error comes back at once, nothing is settled, the handle goes on, and
// destroy() again tries again.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import { openProcess, SandboxLifecycleConflict, SandboxOperationFailed } from "../dist/index.js";
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
  const during = w.write(new TextEncoder().encode("still here\n")); // held too
  const [ea, eb] = await Promise.allSettled([a, b]);
  assert.equal(ea.status, "rejected");
  survived(ea.reason);
  assert.equal(eb.reason, ea.reason, "both callers get the same rejection");
  assert.ok(Date.now() - t0 < DESTROY_TIMEOUT / 2, `the error, not destroyTimeout: ${Date.now() - t0} ms`);

  // The process still runs, and the handle still drives it, on the same connection.
  await during;
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
  await assert.rejects(r.read(), (e) => e instanceof SandboxLifecycleConflict && e.operation === "read_stdout" && e.actual === "process_destroyed");
  await assert.rejects(p.signal("SIGTERM"), (e) => e instanceof SandboxLifecycleConflict && e.operation === "signal_process" && e.actual === "process_destroyed");
});

// Dials is ws's WebSocket, counting the connections of the handle that
// ended (refused or cut), so a test knows when the reconnection has given
// up a dial and waits out its backoff.
class Dials extends WebSocket {
  static ended = 0;
  static waiting = [];
  constructor(...args) {
    super(...args);
    this.on("close", () => {
      Dials.ended++;
      for (const w of Dials.waiting.splice(0)) w();
    });
  }
  static async until(n) {
    while (Dials.ended < n) await new Promise((r) => Dials.waiting.push(r));
  }
}

test("a destroy the server could not complete as the first frame of a new connection rejects; the handle resumes the process; destroy() again settles", async () => {
  const url = `ws://${proxy.addr}/`;
  // A long backoff: after the refused resume the handle waits, and only
  // destroy() cuts the wait short, so its destroy is the next connection's
  // first frame.
  const p = await openProcess(url, instance("stubborn-new"), req("cat"), {
    WebSocket: Dials,
    destroyTimeout: DESTROY_TIMEOUT,
    reconnectMin: 20_000,
    reconnectMax: 20_000,
  });
  const w = p.input.getWriter();
  const r = p.output.getReader();
  await echo(w, r, "before\n");

  const ended = Dials.ended;
  await proxy.cmd("refuse true");
  try {
    assert.equal(await proxy.cmd("cutall"), "cut 1");
    await Dials.until(ended + 2); // the cut connection and the refused resume
  } finally {
    await proxy.cmd("refuse false");
  }
  const accepted = Number((await proxy.cmd("accepted")).split(" ")[1]);
  const t0 = Date.now();
  await assert.rejects(p.destroy(), survived);
  assert.ok(Date.now() - t0 < DESTROY_TIMEOUT / 2, `the error, not destroyTimeout: ${Date.now() - t0} ms`);

  // The handle resumes the process, which still runs.
  await echo(w, r, "resumed\n");
  assert.equal(p.progress().connections, 2);
  assert.equal(await proxy.cmd("accepted"), `accepted ${accepted + 2}`, "a connection for the destroy, one for the resume");

  await p.destroy();
  await assert.rejects(r.read(), (e) => e instanceof SandboxLifecycleConflict && e.operation === "read_stdout" && e.actual === "process_destroyed");
});
