// Terminals in the TypeScript client: the tty option in the open, the
// handle's tty and resize(), checked against a fake server written with
// ws (what goes on the wire) and against the real Go server (a shell on a
// pseudo-terminal, its size following resize, across a cut).
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocketServer } from "ws";
import { openProcess, decode, encode, argumentsDigest, SandboxOperationFailed } from "../dist/index.js";
import { req, startServer, startCutProxy, instance } from "./helpers.mjs";

const PID = "8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5";
const TOKEN = "3b0e8c1d2f4a6b8c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c";

// fake runs a server whose every connection goes to onConn({ws, next, send}),
// next() being the client's next decoded frame.
async function fake(onConn) {
  const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, handleProtocols: () => "procwire.v1" });
  await new Promise((r) => wss.on("listening", r));
  wss.on("connection", (ws) => {
    const queue = [];
    const waiting = [];
    let first = true;
    ws.on("message", (data) => {
      const f = decode(data);
      if (!first && f.type === "destroy" && f.process_id === undefined) {
        ws.send(encode({ type: "destroyed", process_id: PID }));
        ws.close(1000);
      }
      first = false;
      const w = waiting.shift();
      if (w) w(f);
      else queue.push(f);
    });
    const next = () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiting.push(r)));
    onConn({ ws, next, send: (f) => ws.send(encode(f)) });
  });
  return {
    url: `ws://127.0.0.1:${wss.address().port}/`,
    close: () =>
      new Promise((r) => {
        for (const c of wss.clients) c.terminate();
        wss.close(r);
      }),
  };
}

async function opened(open, tty) {
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
    },
    stdin_limit: 65536,
    stdout_window: 1024,
    stderr_window: 1024,
    grace_ms: 30000,
    heartbeat_ms: 0,
    exit_wait_ms: 1000,
    max_data: 262144,
    tty: tty || undefined,
  };
}

// nextOf skips frames until one of type.
async function nextOf(next, type) {
  for (;;) {
    const f = await next();
    if (f.type === type) return f;
  }
}

test("tty: the open carries it, opened.tty sets handle.tty, the last resize() is sent, and again after a resume", async () => {
  const got = [];
  let first;
  const srv = await fake(async ({ ws, next, send }) => {
    const f = await next();
    if (f.type === "open") {
      got.push(f.tty);
      first = await opened(f, true);
      send(first);
      got.push(await nextOf(next, "resize"));
      ws.terminate(); // a lost connection: the client resumes
    } else if (f.type === "resume") {
      send({ type: "resumed", process_id: PID, evidence: first.evidence, stdin_received: 0, stdin_limit: 65536, tty: true });
      got.push(await nextOf(next, "resize"));
    }
  });
  const h = await openProcess(srv.url, "inst-tty", req("sh"), { tty: { rows: 24, cols: 80, term: "xterm-256color" }, reconnectMin: 5 });
  assert.equal(h.tty, true);
  h.resize(30, 100);
  h.resize(40, 120); // before the writer runs: only the last one goes
  const deadline = Date.now() + 10_000;
  while (got.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.deepEqual(got, [
    { rows: 24, cols: 80, term: "xterm-256color" },
    { type: "resize", rows: 40, cols: 120 },
    { type: "resize", rows: 40, cols: 120 },
  ]);
  assert.throws(() => h.resize(0, 80), RangeError);
  assert.throws(() => h.resize(24, 65536), RangeError);
  assert.throws(() => h.resize(24.5, 80), RangeError);
  await h.destroy();
  await srv.close();
});

test("tty: resize() on a process without a terminal is a TypeError; nothing is sent", async () => {
  const frames = [];
  const srv = await fake(async ({ next, send }) => {
    send(await opened(await next(), false));
    for (;;) frames.push((await next()).type);
  });
  const h = await openProcess(srv.url, "inst-pipes", req("cat"));
  assert.equal(h.tty, false);
  assert.throws(() => h.resize(24, 80), TypeError);
  await h.destroy();
  assert.ok(!frames.includes("resize"), `frames: ${frames}`);
  await srv.close();
});

test("tty: a server that answers an open with a terminal without opened.tty broke the protocol; the process is destroyed", async () => {
  let destroyed;
  const got = new Promise((r) => (destroyed = r));
  const srv = await fake(async ({ next, send }) => {
    send(await opened(await next(), false));
    destroyed(await nextOf(next, "destroy"));
    send({ type: "destroyed", process_id: PID });
  });
  await assert.rejects(openProcess(srv.url, "inst-no-tty", req("sh"), { tty: { rows: 24, cols: 80 } }), (e) => {
    assert.ok(e instanceof SandboxOperationFailed, String(e));
    assert.equal(e.reason, "protocol_violation");
    assert.match(e.message, /opened\.tty/);
    return true;
  });
  assert.deepEqual(await got, { type: "destroy" });
  await srv.close();
});

test("tty against the server: sh on a terminal of the asked size, resize() followed, across a cut; no stderr", { timeout: 60_000 }, async (t) => {
  const srv = await startServer();
  t.after(() => srv.stop());
  const proxy = await startCutProxy(srv.addr);
  t.after(() => proxy.stop());
  const h = await openProcess(
    `ws://${proxy.addr}/`,
    instance("tty"),
    req("sh", "-c", 'stty size; echo "TERM=$TERM"; while read x; do [ "$x" = end ] && exit 4; stty size; done'),
    { tty: { rows: 24, cols: 80, term: "xterm-256color" }, reconnectMin: 5 },
  );
  assert.equal(h.tty, true);
  const reader = h.output.getReader();
  const dec = new TextDecoder();
  let out = "";
  const readUntil = async (text) => {
    while (!out.includes(text)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`output ended before ${JSON.stringify(text)}: ${JSON.stringify(out)}`);
      out += dec.decode(value, { stream: true });
    }
  };
  await readUntil("24 80\r\nTERM=xterm-256color\r\n");
  const w = h.input.getWriter();
  h.resize(30, 100);
  await proxy.cmd("cutall");
  // Lines until one is answered with the new size: a line already written
  // may reach the terminal before the resize does.
  for (let i = 0; i < 50 && !out.includes("30 100\r\n"); i++) {
    await w.write(new TextEncoder().encode("x\r"));
    await Promise.race([readUntil("30 100\r\n"), new Promise((r) => setTimeout(r, 100))]);
  }
  await readUntil("30 100\r\n");
  await w.write(new TextEncoder().encode("end\r"));
  assert.deepEqual(await h.wait(), { code: 4 });
  const errReader = h.error.getReader();
  assert.equal((await errReader.read()).done, true, "a terminal has no separate stderr");
  assert.ok(h.progress().connections >= 2, "the cut was resumed");
  await h.destroy();
});
