// The handle against the real Go server: streams, half-close, exits, signals.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { openProcess, SandboxLifecycleConflict, SandboxOperationFailed } from "../dist/index.js";
import { startServer, readAll, req, instance, pattern, writeAll } from "./helpers.mjs";

let srv;
before(async () => {
  srv = await startServer();
});
after(async () => {
  await srv?.stop();
});

// destroyedBy: the error of an operation on a destroyed handle.
function destroyedBy(operation) {
  return (e) => e instanceof SandboxLifecycleConflict && e.operation === operation && e.expected === "running" && e.actual === "process_destroyed";
}

test("64 MiB through cat, byte-exact", async () => {
  const p = await openProcess(srv.url, instance(), req("cat"));
  const data = pattern(64 << 20, 7);
  const [, out] = await Promise.all([writeAll(p.input, data), readAll(p.output)]);
  assert.equal(out.length, data.length);
  assert.ok(out.equals(data), "output differs from input");
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
});

test("ACP-shaped NDJSON echo: 300 frames up to 1 MiB, byte-exact", async () => {
  const p = await openProcess(srv.url, instance(), req("cat"));
  const frames = [];
  for (let i = 0; i < 300; i++) {
    const size = i === 299 ? 1 << 20 : Math.floor((i * 7919) % (1 << 20));
    const body = JSON.stringify({ jsonrpc: "2.0", id: i, params: { text: "x".repeat(Math.max(0, size - 60)) } });
    frames.push(body + "\n");
  }
  const reader = p.output.getReader();
  const writer = p.input.getWriter();
  let buf = "";
  const dec = new TextDecoder();
  for (const f of frames) {
    await writer.write(new TextEncoder().encode(f));
    // Wait for the echo of this frame before sending the next, as an ACP
    // peer does with a request and its answer.
    while (!buf.includes("\n")) {
      const { value, done } = await reader.read();
      assert.equal(done, false);
      buf += dec.decode(value, { stream: true });
    }
    const nl = buf.indexOf("\n");
    assert.equal(buf.slice(0, nl + 1), f);
    buf = buf.slice(nl + 1);
  }
  await writer.close();
  const { done } = await reader.read();
  assert.equal(done, true);
  assert.equal(buf, "");
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
});

test("wc -c counts what was written after input.close()", async () => {
  const p = await openProcess(srv.url, instance(), req("wc", "-c"));
  await writeAll(p.input, pattern(1234567));
  const out = (await readAll(p.output)).toString().trim();
  assert.equal(out, "1234567");
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
});

test("exit codes, stderr, and wait() settles once with the same object", async () => {
  const p = await openProcess(srv.url, instance(), req("sh", "-c", "echo oops >&2; exit 42"));
  const [out, err] = await Promise.all([readAll(p.output), readAll(p.error)]);
  assert.equal(out.length, 0);
  assert.equal(err.toString(), "oops\n");
  const e1 = await p.wait();
  const e2 = await p.wait();
  assert.deepEqual(e1, { code: 42 });
  assert.equal(e1, e2, "wait returns the same object");
  assert.equal(p.wait(), p.wait(), "wait returns the same promise");
  assert.equal(p.errorDropped(), 0);
  await p.destroy();
});

test("signals: SIGTERM kills, the exit names the signal; after the exit it is already_exited", async () => {
  const p = await openProcess(srv.url, instance(), req("sleep", "600"));
  assert.equal(await p.signal("SIGTERM"), true);
  assert.deepEqual(await p.wait(), { signal: "SIGTERM" });
  await readAll(p.output);
  assert.equal(await p.signal("SIGKILL"), false);
  await assert.rejects(p.signal("SIGHUP"), TypeError);
  await p.destroy();
});

test("evidence matches the request", async () => {
  const r = req("true");
  const id = instance();
  const p = await openProcess(srv.url, id, r);
  assert.equal(p.evidence.instance_id, id);
  assert.equal(p.evidence.process_id, p.processId);
  assert.equal(p.evidence.executable, "true");
  assert.equal(p.evidence.wire_revision, "procwire.v1");
  const h = createHash("sha256").update(Buffer.from([0, 0, 0, 0])).digest("hex");
  assert.equal(p.evidence.arguments_digest, "sha256:" + h);
  await p.wait();
  await p.destroy();
});

test("destroy twice concurrently: one destroy, both settle; later calls reject with SandboxLifecycleConflict process_destroyed", async () => {
  const p = await openProcess(srv.url, instance(), req("sleep", "600"));
  const a = p.destroy();
  const b = p.destroy();
  assert.equal(a, b, "the same promise");
  await Promise.all([a, b]);
  await assert.rejects(p.signal("SIGTERM"), destroyedBy("signal_process"));
  await assert.rejects(p.output.getReader().read(), destroyedBy("read_stdout"));
  const w = p.wait();
  await w.then((e) => assert.deepEqual(e, { signal: "SIGKILL" }), (e) => assert.ok(destroyedBy("wait_process")(e), String(e)));
  await p.destroy(); // idempotent
});

test("input.abort() destroys the process", async () => {
  const p = await openProcess(srv.url, instance(), req("cat"));
  await p.input.abort(new Error("no more"));
  await p.destroy();
  await assert.rejects(p.signal("SIGTERM"), destroyedBy("signal_process"));
});

test("a second open on the instance is SandboxLifecycleConflict with the server's fields", async () => {
  const id = instance();
  const p = await openProcess(srv.url, id, req("sleep", "600"));
  await assert.rejects(openProcess(srv.url, id, req("true")), (e) => {
    assert.ok(e instanceof SandboxLifecycleConflict);
    assert.equal(e.operation, "open_process");
    assert.equal(e.actual, "process_already_open");
    return true;
  });
  await p.destroy();
});

test("an executable that does not exist is SandboxOperationFailed", async () => {
  await assert.rejects(openProcess(srv.url, instance(), req("/nonexistent/x")), (e) => {
    assert.ok(e instanceof SandboxOperationFailed);
    assert.equal(e.reason, "executable_not_found");
    return true;
  });
});

test("destroy wakes every pending call: a read, a write, wait(), signal()", async () => {
  const p = await openProcess(srv.url, instance("unblock"), req("sleep", "600"), { stdinWindow: 1024 });
  const read = p.output.getReader().read();
  const w = p.input.getWriter();
  const write = w.write(new Uint8Array(1 << 20)); // more than the window: blocks
  const wait = p.wait();
  read.catch(() => {});
  write.catch(() => {});
  await p.destroy();
  await assert.rejects(read, destroyedBy("read_stdout"));
  await assert.rejects(write, destroyedBy("write_stdin"));
  await wait.then((e) => assert.deepEqual(e, { signal: "SIGKILL" }), (e) => assert.ok(destroyedBy("wait_process")(e), String(e)));
  await assert.rejects(p.signal("SIGINT"), destroyedBy("signal_process"));
});
