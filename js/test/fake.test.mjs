// A hostile server written with ws: tampered evidence, routing headers and
// protocol violations, checked without the Go server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocket, WebSocketServer } from "ws";
import { openProcess, decode, encode, argumentsDigest, DecodeError, SandboxOperationFailed } from "../dist/index.js";
import { req } from "./helpers.mjs";

const PID = "8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5";
const TOKEN = "3b0e8c1d2f4a6b8c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c";

// fake runs a server whose every connection goes to onConn(ws, req, frames),
// frames being an async iterator of the client's decoded frames.
async function fake(onConn, options = {}) {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, handleProtocols: () => "procwire.v1", ...options });
  await new Promise((r) => wss.on("listening", r));
  wss.on("connection", (ws, request) => {
    const queue = [];
    const waiting = [];
    let first = true;
    ws.on("message", (data) => {
      const f = decode(data);
      // A destroy inside a session is answered here, as the server does.
      if (!first && f.type === "destroy" && f.process_id === undefined && f.instance_id === undefined) {
        ws.send(encode({ type: "destroyed", process_id: PID }));
        ws.close(1000);
      }
      first = false;
      const w = waiting.shift();
      if (w) w(f);
      else queue.push(f);
    });
    const next = () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiting.push(r)));
    const send = (f) => ws.send(encode(f));
    onConn({ ws, request, next, send });
  });
  return { url: `ws://127.0.0.1:${wss.address().port}/`, close: () => new Promise((r) => { for (const c of wss.clients) c.terminate(); wss.close(r); }) };
}

async function opened(open, patch = {}) {
  return {
    type: "opened",
    process_id: PID,
    token: TOKEN,
    evidence: {
      wire_revision: "procwire.v1",
      provider: "fake",
      provider_revision: "0",
      instance_id: open.instance_id,
      process_id: PID,
      executable: open.request.executable,
      working_directory: open.request.working_directory,
      arguments_digest: await argumentsDigest(open.request.arguments),
      started_at: "2026-11-29T09:30:00.000Z",
      ...patch,
    },
    stdin_limit: 65536,
    stdout_window: 1024,
    stderr_window: 1024,
    grace_ms: 30000,
    heartbeat_ms: 0,
    exit_wait_ms: 1000,
    max_data: 262144,
  };
}

// violation: the client's word for a server that broke the wire.
function violation(e, operation) {
  return e instanceof SandboxOperationFailed && e._tag === "SandboxOperationFailed" && e.operation === operation && e.reason === "protocol_violation";
}

test("tampered evidence at open: SandboxOperationFailed{open_process_identity, evidence_mismatch} naming the field, and the process is destroyed", async () => {
  let destroyed;
  const got = new Promise((r) => (destroyed = r));
  const srv = await fake(async ({ next, send }) => {
    const open = await next();
    send(await opened(open, { executable: "evil" }));
    const d = await next();
    destroyed(d);
    send({ type: "destroyed", process_id: PID });
  });
  await assert.rejects(openProcess(srv.url, "inst-1", req("cat", "-u")), (e) => {
    assert.ok(e instanceof SandboxOperationFailed);
    assert.equal(e.operation, "open_process_identity");
    assert.equal(e.reason, "evidence_mismatch");
    assert.match(e.message, /evidence\.executable/);
    return true;
  });
  assert.deepEqual(await got, { type: "destroy" });
  await srv.close();
});

test("tampered evidence on resume: the handle ends naming the field; destroy by id follows; routing headers sent", async () => {
  let conns = 0;
  let headers = [];
  let destroyed;
  const got = new Promise((r) => (destroyed = r));
  let first;
  const srv = await fake(async ({ ws, request, next, send }) => {
    conns++;
    headers.push({ instance: request.headers["procwire-instance"], process: request.headers["procwire-process"] });
    const f = await next();
    if (f.type === "open") {
      first = await opened(f);
      send(first);
      ws.terminate(); // a lost connection: the client resumes
    } else if (f.type === "resume") {
      assert.equal(f.token, TOKEN);
      send({ type: "resumed", process_id: PID, evidence: { ...first.evidence, started_at: "2026-11-29T09:30:00.001Z" }, stdin_received: 0, stdin_limit: 65536 });
    } else if (f.type === "destroy") {
      destroyed(f);
      send({ type: "destroyed", process_id: PID });
    }
  });
  const p = await openProcess(srv.url, "inst-2", req("cat"), { reconnectMin: 5 });
  await assert.rejects(p.wait(), (e) => {
    assert.ok(e instanceof SandboxOperationFailed);
    assert.equal(e.operation, "open_process_identity");
    assert.equal(e.reason, "evidence_mismatch");
    assert.match(e.message, /evidence\.started_at/);
    return true;
  });
  assert.deepEqual(await got, { type: "destroy", process_id: PID, token: TOKEN });
  assert.deepEqual(headers[0], { instance: "inst-2", process: undefined });
  assert.deepEqual(headers[1], { instance: "inst-2", process: PID });
  await p.destroy(); // settles with the destroy the client made itself
  await srv.close();
});

test("stdout past the window is a protocol violation that ends the handle", async () => {
  const srv = await fake(async ({ next, send }) => {
    const f = await next();
    if (f.type === "open") {
      send(await opened(f));
      send({ type: "stdout", off: 0, data: new Uint8Array(2048) });
    } else if (f.type === "destroy") {
      send({ type: "destroyed", process_id: PID });
    }
  });
  const p = await openProcess(srv.url, "inst-3", req("cat"));
  await assert.rejects(p.wait(), (e) => violation(e, "wait_process") && /stdout\.data/.test(e.message));
  await assert.rejects(p.output.getReader().read(), (e) => violation(e, "read_stdout"));
  await p.destroy(); // settles with the destroy the client made itself
  await srv.close();
});

// One S2 (Snappy) block: length 5, one literal "hello".
const HELLO_S2 = new Uint8Array([5, 4 << 2, ...Buffer.from("hello")]);
// An S2 block that declares 262,144 zero bytes (the golden vector's).
const ZEROS_S2 = new Uint8Array(Buffer.from("gIAQAAARAR0A8/8C", "base64"));

// compressFake answers an open with opened (patched), then sends frames.
async function compressFake(patch, frames, seen = () => {}) {
  return fake(async ({ next, send }) => {
    const f = await next();
    if (f.type === "open") {
      seen(f);
      send({ ...(await opened(f)), ...patch });
      for (const fr of frames) send(fr);
    } else if (f.type === "destroy") {
      send({ type: "destroyed", process_id: PID });
    }
  });
}

test("compress: the open lists s2 for output only; compressed stdout and stderr are inflated", async () => {
  let open;
  const srv = await compressFake({ output_enc: "s2" }, [
    { type: "stdout", off: 0, data: HELLO_S2, enc: "s2" },
    { type: "stdout", off: 5, data: Buffer.from(" raw") },
    { type: "stderr", off: 0, data: HELLO_S2, enc: "s2" },
    { type: "stdout_eof", off: 9 },
  ], (f) => (open = f));
  const p = await openProcess(srv.url, "inst-c1", req("cat"), { compress: true });
  assert.equal(open.output_enc, "s2");
  assert.equal(open.stdin_enc, undefined);
  const r = p.error.getReader();
  assert.equal(Buffer.from((await r.read()).value).toString(), "hello");
  r.releaseLock();
  const out = [];
  for await (const c of p.output) out.push(c);
  assert.equal(Buffer.concat(out).toString(), "hello raw");
  assert.equal(p.progress().stdoutReceived, 9);
  assert.equal(p.progress().stderrReceived, 5);
  assert.equal(p.progress().framesInflated, 2);
  await p.destroy();
  await srv.close();
});

test("compress violations: an encoding never offered, enc on a direction not negotiated, a block past max_data", async () => {
  for (const [patch, frames, opts, field] of [
    [{ output_enc: "s2" }, [], {}, "opened.output_enc"],
    [{ output_enc: "s2", stdin_enc: "s2" }, [], { compress: true }, "opened.stdin_enc"],
    [{}, [{ type: "stdout", off: 0, data: HELLO_S2, enc: "s2" }], { compress: true }, "stdout.enc"],
    [{}, [{ type: "stderr", off: 0, data: HELLO_S2, enc: "s2" }], {}, "stderr.enc"],
    [{ output_enc: "s2", max_data: 1024 }, [{ type: "stdout", off: 0, data: ZEROS_S2, enc: "s2" }], { compress: true }, "stdout.data"],
    [{ output_enc: "s2", max_data: 1024 }, [{ type: "stderr", off: 0, data: ZEROS_S2, enc: "s2" }], { compress: true }, "stderr.data"],
  ]) {
    const srv = await compressFake(patch, frames);
    const isField = (e) => e instanceof SandboxOperationFailed && e.reason === "protocol_violation" && e.message.includes(field + ":");
    if (field.startsWith("opened.")) {
      await assert.rejects(openProcess(srv.url, "inst-c2", req("cat"), opts), isField, field);
    } else {
      const p = await openProcess(srv.url, "inst-c2", req("cat"), opts);
      await assert.rejects(p.wait(), isField, field);
      await p.destroy();
    }
    await srv.close();
  }
});

test("a second, different exit is a protocol violation; the first stays", async () => {
  const srv = await fake(async ({ next, send }) => {
    const f = await next();
    if (f.type === "open") {
      send(await opened(f));
      send({ type: "exit", code: 3 });
      send({ type: "exit", signal: "SIGKILL" });
    } else if (f.type === "destroy") {
      send({ type: "destroyed", process_id: PID });
    }
  });
  const p = await openProcess(srv.url, "inst-4", req("cat"));
  assert.deepEqual(await p.wait(), { code: 3 });
  await assert.rejects(p.error.getReader().read().then(() => p.signal("SIGTERM")), (e) => violation(e, "signal_process"));
  await p.destroy(); // settles with the destroy the client made itself
  await srv.close();
});

test("an open whose answer is lost is repeated with the same open_key", async () => {
  const keys = [];
  const srv = await fake(async ({ ws, next, send }) => {
    const f = await next();
    if (f.type !== "open") return;
    keys.push(f.open_key);
    if (keys.length === 1) {
      ws.terminate(); // the open reached the server; its answer is lost
      return;
    }
    send(await opened(f));
    send({ type: "stdout", off: 0, data: new TextEncoder().encode("once\n") });
    send({ type: "stdout_eof", off: 5 });
    send({ type: "exit", code: 0 });
  });
  const p = await openProcess(srv.url, "inst-5", req("cat"), { reconnectMin: 5 });
  assert.equal(keys.length, 2);
  assert.match(keys[0], /^[0-9a-f]{64}$/);
  assert.equal(keys[1], keys[0], "the repeat carries the same key");
  const out = [];
  for await (const c of p.output) out.push(...c);
  assert.equal(Buffer.from(out).toString(), "once\n");
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
  await srv.close();
});

test("an open that never gets an answer is destroyed by instance_id and open_key", async () => {
  let key;
  let destroyed;
  const got = new Promise((r) => (destroyed = r));
  const srv = await fake(async ({ ws, next, send }) => {
    const f = await next();
    if (f.type === "open") {
      key = f.open_key;
      ws.terminate();
    } else if (f.type === "destroy") {
      destroyed(f);
      send({ type: "error", code: "SandboxLifecycleConflict", operation: "destroy_process", actual: "process_not_found" });
      ws.close(1000);
    }
  });
  await assert.rejects(openProcess(srv.url, "inst-6", req("cat"), { reconnectMin: 5, reconnectMax: 10, resumeBudget: 3 }), (e) => e instanceof SandboxOperationFailed && e.operation === "open_process" && e.reason === "connection_lost");
  assert.deepEqual(await got, { type: "destroy", instance_id: "inst-6", open_key: key });
  await srv.close();
});

test("in-band failures: a signal the server could not deliver, a stdin it could not write; the session goes on", async () => {
  const srv = await fake(async ({ next, send }) => {
    const f = await next();
    if (f.type !== "open") return;
    send(await opened(f));
    for (;;) {
      const g = await next();
      if (g.type === "signal") {
        send({ type: "error", code: "SandboxOperationFailed", operation: "signal_process", reason: "signal_failed", message: "operation not permitted", id: g.id });
      } else if (g.type === "stdin") {
        send({ type: "error", code: "SandboxOperationFailed", operation: "write_stdin", reason: "stdin_failed" });
        send({ type: "stdout", off: 0, data: new TextEncoder().encode("still here\n") });
        send({ type: "stdout_eof", off: 11 });
        send({ type: "exit", code: 7 });
      }
    }
  });
  const p = await openProcess(srv.url, "inst-7", req("cat"));
  await assert.rejects(p.signal("SIGTERM"), (e) => e instanceof SandboxOperationFailed && e.reason === "signal_failed" && e.frame.id === 1);
  const w = p.input.getWriter();
  await w.write(new Uint8Array([1, 2, 3]));
  const out = [];
  for await (const c of p.output) out.push(...c);
  assert.equal(Buffer.from(out).toString(), "still here\n");
  assert.deepEqual(await p.wait(), { code: 7 });
  await assert.rejects(w.write(new Uint8Array([4])), SandboxOperationFailed);
  await p.destroy();
  await srv.close();
});

test("a close 1001 without procwire's word is a lost connection that is resumed", async () => {
  const seen = [];
  const srv = await fake(async ({ ws, next, send }) => {
    const f = await next();
    seen.push(f.type);
    if (f.type === "open") {
      send(await opened(f));
      ws.close(1001);
    } else if (f.type === "resume") {
      send({ type: "resumed", process_id: PID, evidence: (await opened({ instance_id: "inst-8", request: req("cat") })).evidence, stdin_received: 0, stdin_limit: 65536 });
      send({ type: "stdout_eof", off: 0 });
      send({ type: "exit", code: 0 });
    }
  });
  const p = await openProcess(srv.url, "inst-8", req("cat"), { reconnectMin: 5 });
  assert.deepEqual(await p.wait(), { code: 0 });
  assert.deepEqual(seen, ["open", "resume"]);
  await p.destroy();
  await srv.close();
});

test("a window larger than asked for is refused at open, and the process destroyed", async () => {
  let destroyed;
  const got = new Promise((r) => (destroyed = r));
  const srv = await fake(async ({ next, send }) => {
    const f = await next();
    if (f.type !== "open") return;
    send({ ...(await opened(f)), stdout_window: 8192 });
    destroyed(await next());
    send({ type: "destroyed", process_id: PID });
  });
  await assert.rejects(openProcess(srv.url, "inst-9", req("cat"), { stdoutWindow: 4096 }), (e) => violation(e, "open_process") && e.message.includes("opened.stdout_window"));
  assert.deepEqual(await got, { type: "destroy" });
  await srv.close();
});

test("heartbeat: a peer that stops answering pings is dropped and the process resumed", async () => {
  const seen = [];
  let firstClosed;
  const closed = new Promise((r) => (firstClosed = r));
  const srv = await fake(
    async ({ ws, next, send }) => {
      const f = await next();
      seen.push(f.type);
      if (f.type === "open") {
        ws.on("close", () => firstClosed());
        send({ ...(await opened(f)), heartbeat_ms: 100 });
      } else if (f.type === "resume") {
        ws.on("ping", () => ws.pong()); // this connection is alive
        const o = await opened({ instance_id: "inst-10", request: req("cat") });
        send({ type: "resumed", process_id: PID, evidence: o.evidence, stdin_received: 0, stdin_limit: 65536 });
        send({ type: "stdout_eof", off: 0 });
        send({ type: "exit", code: 0 });
      }
    },
    { autoPong: false }, // this server never answers a ping
  );
  const p = await openProcess(srv.url, "inst-10", req("cat"), { reconnectMin: 5 });
  await closed;
  assert.deepEqual(await p.wait(), { code: 0 });
  assert.deepEqual(seen, ["open", "resume"]);
  await p.destroy();
  assert.equal(p.progress().connections, 2);
  await srv.close();
});

test("a resume the server never answers is abandoned after the heartbeat (at least 1 s) and another made, within the grace", async () => {
  const seen = [];
  let resumes = 0;
  const srv = await fake(async ({ ws, next, send }) => {
    const f = await next();
    seen.push(f.type);
    if (f.type === "open") {
      send({ ...(await opened(f)), heartbeat_ms: 100 });
      ws.terminate(); // lost at once: the client resumes
    } else if (f.type === "resume" && ++resumes > 1) {
      const o = await opened({ instance_id: "inst-11", request: req("cat") });
      send({ type: "resumed", process_id: PID, evidence: o.evidence, stdin_received: 0, stdin_limit: 65536 });
      send({ type: "stdout_eof", off: 0 });
      send({ type: "exit", code: 0 });
    } // the first resume is swallowed: no answer, no close
  });
  const p = await openProcess(srv.url, "inst-11", req("cat"), { reconnectMin: 5 });
  const began = Date.now();
  assert.deepEqual(await p.wait(), { code: 0 });
  assert.ok(Date.now() - began < 10_000, "resumed long before the 30 s grace");
  assert.deepEqual(seen, ["open", "resume", "resume"]);
  await p.destroy();
  await srv.close();
});

test("invalid UTF-8 in a text message is a protocol violation (the decoder checks it, not ws)", async () => {
  const srv = await fake(async ({ ws, next, send }) => {
    const f = await next();
    if (f.type === "open") {
      send(await opened(f));
      const bad = Buffer.concat([Buffer.from('{"type":"error","code":"SandboxFileTooLarge","message":"'), Buffer.from([0xff]), Buffer.from('"}\n')]);
      ws.send(bad, { binary: false });
    } else if (f.type === "destroy") {
      send({ type: "destroyed", process_id: PID });
    }
  });
  const p = await openProcess(srv.url, "inst-11", req("cat"));
  await assert.rejects(p.wait(), (e) => violation(e, "wait_process") && e.cause instanceof DecodeError && e.cause.frame === "error" && e.cause.kind === "syntax");
  await p.destroy();
  await srv.close();
});

// FakeWS is a WHATWG WebSocket class with the server inside: it answers
// open, resume and destroy in-process, so that a test decides what arrives
// in the same turn. Connection n (from 1) follows FakeWS.script[n], or
// FakeWS.rest.
class FakeWS {
  static conns = 0;
  static frames = [];
  static script = {};
  static rest = "serve";
  constructor(url, protocols) {
    this.n = ++FakeWS.conns;
    this.protocols = protocols;
    this.protocol = "";
    this.binaryType = "blob";
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    this.mode = FakeWS.script[this.n] ?? FakeWS.rest;
    if (this.mode === "hang") return; // the dial never completes
    setTimeout(() => {
      this.protocol = "procwire.v1";
      this.onopen?.({});
    }, 0);
  }
  deliver(f) {
    this.onmessage?.({ data: encode(f) });
  }
  async send(text) {
    const f = decode(text);
    FakeWS.frames.push({ conn: this.n, ...f });
    if (f.type === "open") {
      this.deliver(await opened(f));
      if (this.mode === "open-then-lose") setTimeout(() => this.onclose?.({ code: 1006, reason: "" }), 0);
    } else if (f.type === "resume") {
      const answer = { type: "resumed", process_id: PID, evidence: FakeWS.evidence, stdin_received: 0, stdin_limit: 65536 };
      if (this.mode === "resume-then-lose") {
        // The answer and the loss in the same turn: the client attaches a
        // connection that is already gone.
        queueMicrotask(() => {
          this.deliver(answer);
          this.onclose?.({ code: 1006, reason: "" });
        });
      } else if (this.mode === "serve") {
        this.deliver(answer);
      }
    } else if (f.type === "destroy") {
      this.deliver({ type: "destroyed", process_id: PID });
      setTimeout(() => this.onclose?.({ code: 1000, reason: "" }), 0);
    }
  }
  close() {
    setTimeout(() => this.onclose?.({ code: 1005, reason: "" }), 0);
  }
}

test("a connection lost in the very turn it is attached: the nested reconnection keeps the supervising flag; one destroy, by the reconnection", async () => {
  const open = { type: "open", instance_id: "inst-n", request: req("cat") };
  FakeWS.evidence = (await opened(open)).evidence;
  FakeWS.conns = 0;
  FakeWS.frames = [];
  // 1: opened, then lost; 2: resumed and lost in the same turn; 3: the
  // nested reconnection's dial hangs; 4 and on: served.
  FakeWS.script = { 1: "open-then-lose", 2: "resume-then-lose", 3: "hang" };
  FakeWS.rest = "serve";
  const p = await openProcess("ws://127.0.0.1:1/", "inst-n", req("cat"), { WebSocket: FakeWS, reconnectMin: 1, reconnectMax: 2 });
  while (FakeWS.conns < 3) await new Promise((r) => setTimeout(r, 1));
  await p.destroy();
  const destroys = FakeWS.frames.filter((f) => f.type === "destroy");
  assert.equal(destroys.length, 1, `one destroy, got ${JSON.stringify(destroys)}`);
  assert.equal(p.progress().connections, 2, "the open and the resume lost at once");
});

test("a pong nobody asked for is a protocol violation; pings asked for and granted are sent and pongs taken", async () => {
  // ws (which can ping) asks for no pings: a pong is a violation.
  const srv = await fake(async ({ next, send }) => {
    const f = await next();
    if (f.type === "open") {
      assert.equal(f.pings, undefined);
      send(await opened(f));
      send({ type: "pong", id: 0 });
    } else if (f.type === "destroy") {
      send({ type: "destroyed", process_id: PID });
    }
  });
  const p = await openProcess(srv.url, "inst-p", req("cat"));
  await assert.rejects(p.wait(), (e) => violation(e, "wait_process") && /pong/.test(e.message));
  await p.destroy();
  await srv.close();
  // A WHATWG class asks for pings; granted with a heartbeat, it pings at
  // heartbeat/2 and takes the pongs.
  const pings = [];
  class Pinging extends FakeWS {
    async send(text) {
      const f = decode(text);
      if (f.type === "open") {
        assert.equal(f.pings, true);
        this.deliver({ ...(await opened(f)), heartbeat_ms: 40, pings: true });
      } else if (f.type === "ping") {
        pings.push(f.id);
        this.deliver({ type: "pong", id: f.id });
      } else {
        return super.send(text);
      }
    }
  }
  FakeWS.script = {};
  FakeWS.rest = "serve";
  const q = await openProcess("ws://127.0.0.1:1/", "inst-p2", req("cat"), { WebSocket: Pinging });
  while (pings.length < 4) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(pings.slice(0, 4), [0, 1, 2, 3]);
  assert.equal(q.progress().connections, 1, "a link that answers stays up");
  await q.destroy();
});

test("an open's retry backoff is cut by its signal: rejects with the reason after destroying by the key", async () => {
  let destroyed;
  const got = new Promise((r) => (destroyed = r));
  let opens = 0;
  const srv = await fake(async ({ ws, next, send }) => {
    const f = await next();
    if (f.type === "open") {
      opens++;
      ws.terminate(); // the answer is lost: the client backs off, then repeats
    } else if (f.type === "destroy") {
      destroyed(f);
      send({ type: "destroyed", process_id: PID });
    }
  });
  const ac = new AbortController();
  const opening = openProcess(srv.url, "inst-b", req("cat"), { reconnectMin: 20_000, reconnectMax: 20_000, openTimeout: 120_000, signal: ac.signal });
  while (opens < 1) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50)); // inside the minute's backoff
  const why = new Error("interrupted");
  const t0 = Date.now();
  ac.abort(why);
  await assert.rejects(opening, (e) => e === why);
  assert.ok(Date.now() - t0 < 5000, `not the backoff: ${Date.now() - t0} ms`);
  assert.equal((await got).open_key.length, 64);
  await srv.close();
});

// The first frame in the upgrade (PROTOCOL.md §1): the open, and the resume
// after a lost connection, travel as the subprotocol procwire.first.<b64url>
// beside procwire.v1.first; a server that selects procwire.v1.first gets no
// message for them, one that selects procwire.v1 gets them as messages.
test("the open and the resume go in the upgrade when the server takes them, as messages when it does not", async () => {
  for (const takes of [true, false]) {
    const firsts = [];
    const messages = [];
    let first;
    const srv = await fake(
      async ({ ws, request, next, send }) => {
        const offered = request.headers["sec-websocket-protocol"].split(",").map((s) => s.trim());
        const tok = offered.find((s) => s.startsWith("procwire.first."));
        const f = takes && tok ? decode(Buffer.from(tok.slice("procwire.first.".length), "base64url")) : await next();
        if (f.type === "destroy") {
          send({ type: "destroyed", process_id: PID });
          ws.close(1000);
          return;
        }
        assert.ok(offered.includes("procwire.v1") && offered.includes("procwire.v1.first") && tok, `${f.type}: the first frame is offered`);
        firsts.push(f.type);
        if (f.type === "open") {
          first = await opened(f);
          send(first);
          ws.terminate(); // a lost connection: the client resumes
          return;
        }
        assert.equal(f.type, "resume");
        assert.equal(f.token, TOKEN);
        send({ type: "resumed", process_id: PID, evidence: first.evidence, stdin_received: 0, stdin_limit: 65536 });
        send({ type: "stdout", off: 0, data: new TextEncoder().encode("hi\n") });
        const m = await next(); // the first message after the resume: the handle's destroy
        messages.push(m.type);
        if (takes) {
          // The fake answers an in-session destroy itself only after a first message.
          send({ type: "destroyed", process_id: PID });
          ws.close(1000);
        }
      },
      { handleProtocols: (protocols) => (takes && protocols.has("procwire.v1.first") ? "procwire.v1.first" : "procwire.v1") },
    );
    const p = await openProcess(srv.url, "inst-first", req("cat"), { reconnectMin: 5 });
    const r = p.output.getReader();
    assert.equal(new TextDecoder().decode((await r.read()).value), "hi\n");
    r.releaseLock();
    await p.destroy();
    assert.deepEqual(firsts, ["open", "resume"], `takes ${takes}`);
    assert.deepEqual(messages, ["destroy"], `takes ${takes}: no resume message`);
    await srv.close();
  }
});

// refusingFake is a server that answers an open (then cuts the
// connection), a resume (with "hi\n" on stdout) and a destroy, taking a
// first frame offered in the upgrade. It records every upgrade's offer in
// offers and the first frames it read in firsts; refuse(offer) gives the
// status to refuse an upgrade with, 0 to accept it.
async function refusingFake(t, refuse) {
  const offers = [];
  const firsts = [];
  let first;
  const srv = await fake(
    async ({ ws, next, send }) => {
      const f = await next();
      if (f.type === "destroy") {
        send({ type: "destroyed", process_id: PID });
        ws.close(1000);
        return;
      }
      firsts.push(f.type);
      if (f.type === "open") {
        first = await opened(f);
        send(first);
        ws.terminate(); // a lost connection: the client resumes
        return;
      }
      send({ type: "resumed", process_id: PID, evidence: first.evidence, stdin_received: 0, stdin_limit: 65536 });
      send({ type: "stdout", off: 0, data: new TextEncoder().encode("hi\n") });
      await next(); // the handle's destroy
      send({ type: "destroyed", process_id: PID });
      ws.close(1000);
    },
    {
      handleProtocols: (protocols) => (protocols.has("procwire.v1.first") ? "procwire.v1.first" : "procwire.v1"),
      verifyClient: (info, cb) => {
        const offer = info.req.headers["sec-websocket-protocol"];
        offers.push(offer);
        const status = refuse(offer);
        if (status) cb(false, status);
        else cb(true);
      },
    },
  );
  t.after(() => srv.close());
  return { url: srv.url, offers, firsts };
}

// readsHiAfterTheResume checks that p, opened on a refusingFake, reads its
// "hi\n" after the resume, and destroys it.
async function readsHiAfterTheResume(p, firsts) {
  const r = p.output.getReader();
  assert.equal(new TextDecoder().decode((await r.read()).value), "hi\n");
  r.releaseLock();
  await p.destroy();
  assert.deepEqual(firsts, ["open", "resume"]);
}

// firstFrameAsMessage: neither the open nor the resume is offered in the
// upgrade, even to a server that would take it; both go as messages (an
// offer is refused with 500, which stands).
test("with firstFrameAsMessage the open and the resume go as messages", async (t) => {
  const { url, offers, firsts } = await refusingFake(t, (offer) => (offer.includes("procwire.first.") ? 500 : 0));
  await readsHiAfterTheResume(await openProcess(url, "inst-first-msg", req("cat"), { reconnectMin: 5, openTimeout: 5000, resumeBudget: 2, firstFrameAsMessage: true }), firsts);
  assert.ok(offers.length >= 2, `${offers.length} upgrades`);
  for (const o of offers) assert.ok(!o.includes("procwire.first.") && !o.includes("procwire.v1.first"), `offered: ${o}`);
});

// A hop refusing an upgrade for the size of its headers (431, or 400 as
// nginx and HAProxy answer) costs one refused request: the open is dialled
// again as a message, and every later first frame (the resume after a cut)
// goes as a message too. Any other refusal stands.
for (const status of [431, 400, 403]) {
  test(`a hop answering ${status} to the first frame in the upgrade`, async (t) => {
    const { url, offers, firsts } = await refusingFake(t, (offer) => (offer.includes("procwire.first.") ? status : 0));
    const opening = openProcess(url, "inst-first-refused", req("cat"), { reconnectMin: 5, openTimeout: 5000, resumeBudget: 2 });
    if (status === 403) {
      await assert.rejects(opening, (e) => e instanceof SandboxOperationFailed && e.reason === "unauthorized");
      assert.equal(offers.length, 1, "not repeated");
      return;
    }
    await readsHiAfterTheResume(await opening, firsts);
    assert.ok(offers.length >= 3, `${offers.length} upgrades`);
    assert.ok(offers[0].includes("procwire.first."), "the open offered in the upgrade");
    for (const o of offers.slice(1)) assert.ok(!o.includes("procwire.first."), `offered after the refusal: ${o}`);
  });
}

// A WHATWG WebSocket does not say why a dial failed: after a dial that
// offered the first frame failed (here a hop refusing the resume with 431),
// the next one sends it as a message. The open goes as a message anyway.
test("WHATWG: a resume refused in the upgrade goes as a message next", async (t) => {
  const { url, offers, firsts } = await refusingFake(t, (offer) => (offer.includes("procwire.first.") ? 431 : 0));
  // ws's class behind a constructor without ping(): the client takes it for a WHATWG one.
  const Whatwg = function (url, protocols) {
    return new WebSocket(url, protocols);
  };
  await readsHiAfterTheResume(await openProcess(url, "inst-first-whatwg", req("cat"), { reconnectMin: 5, openTimeout: 5000, resumeBudget: 3, WebSocket: Whatwg }), firsts);
  assert.ok(!offers[0].includes("procwire.first."), "the open goes as a message");
  assert.ok(offers[1].includes("procwire.first."), "the resume offered in the upgrade");
  for (const o of offers.slice(2)) assert.ok(!o.includes("procwire.first."), `offered after the failure: ${o}`);
});

test("an open cut inside the upgrade that carried it is destroyed by its key", async () => {
  let conns = 0;
  let destroyed;
  const got = new Promise((r) => (destroyed = r));
  const srv = await fake(
    async ({ ws, request, next, send }) => {
      conns++;
      const offered = request.headers["sec-websocket-protocol"] ?? "";
      if (offered.includes("procwire.first.")) {
        ws.terminate(); // as if cut after the server took the open
        return;
      }
      const f = await next();
      assert.equal(f.type, "destroy");
      assert.ok(f.open_key, "destroy by the open's key");
      destroyed(f);
      send({ type: "destroyed", process_id: PID });
      ws.close(1000);
    },
    { handleProtocols: (protocols) => (protocols.has("procwire.v1.first") ? "procwire.v1.first" : "procwire.v1") },
  );
  const ac = new AbortController();
  const opening = openProcess(srv.url, "inst-cut", req("cat"), { reconnectMin: 5, reconnectMax: 10, resumeBudget: 2, signal: ac.signal });
  await assert.rejects(opening);
  const d = await got;
  assert.equal(d.instance_id, "inst-cut");
  assert.ok(conns >= 3, "two opens, then the destroy");
  await srv.close();
});
