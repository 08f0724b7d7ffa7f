// npm run bench: stdout throughput (MB/s) and 1-byte echo latency (p50) of
// the TypeScript client, of a spawned `procwire exec`, and of raw ws binary
// messages, all in the same run against servers on loopback.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { openProcess } from "../dist/index.js";
import { build, startServer, req, instance } from "../test/helpers.mjs";

const SIZE = Number(process.env.BENCH_BYTES ?? 256 << 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ECHOES = Number(process.env.BENCH_ECHOES ?? 2000);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mbps = (bytes, ns) => bytes / 1e6 / (Number(ns) / 1e9);

async function tsStream(url) {
  const p = await openProcess(url, instance("bench"), req("head", "-c", String(SIZE), "/dev/zero"));
  const t0 = process.hrtime.bigint();
  let n = 0;
  for await (const c of p.output) n += c.length;
  const dt = process.hrtime.bigint() - t0;
  if (n !== SIZE) throw new Error(`ts: ${n} bytes`);
  await p.wait();
  await p.destroy();
  return mbps(n, dt);
}

function execArgs(url, argv) {
  return ["exec", "--instance", instance("bench-exec"), "--cwd", "/tmp", "--env", "PATH=/usr/bin:/bin", url, "--", ...argv];
}

async function execStream(url) {
  const { procwire } = build();
  const child = spawn(procwire, execArgs(url, ["head", "-c", String(SIZE), "/dev/zero"]), { stdio: ["ignore", "pipe", "inherit"] });
  // Timed from the first byte, as the client's figure is timed from open.
  let n = 0;
  let t0;
  for await (const c of child.stdout) {
    t0 ??= process.hrtime.bigint();
    n += c.length;
  }
  const dt = process.hrtime.bigint() - t0;
  if (n !== SIZE) throw new Error(`exec: ${n} bytes`);
  return mbps(n, dt);
}

async function rawServer() {
  const child = spawn(process.execPath, [fileURLToPath(new URL("raw-server.mjs", import.meta.url))], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise((r) => createInterface({ input: child.stdout }).once("line", r));
  return { url: `ws://127.0.0.1:${port}/`, stop: () => child.kill() };
}

function connect(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

async function rawStream(url) {
  const ws = await connect(url);
  const t0 = process.hrtime.bigint();
  let n = 0;
  await new Promise((resolve) => {
    ws.on("message", (d) => {
      n += d.length;
      if (n >= SIZE) resolve();
    });
    ws.send(`stream ${SIZE}`);
  });
  const dt = process.hrtime.bigint() - t0;
  ws.close();
  return mbps(n, dt);
}

async function tsEcho(url) {
  const p = await openProcess(url, instance("bench-echo"), req("cat"));
  const w = p.input.getWriter();
  const r = p.output.getReader();
  const one = new Uint8Array([0x61]);
  const lat = [];
  for (let i = 0; i < ECHOES; i++) {
    const t0 = process.hrtime.bigint();
    await w.write(one);
    const { value } = await r.read();
    if (value.length !== 1) throw new Error("ts echo: " + value.length);
    lat.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  await p.destroy();
  return median(lat);
}

async function execEcho(url) {
  const { procwire } = build();
  const child = spawn(procwire, execArgs(url, ["cat"]), { stdio: ["pipe", "pipe", "inherit"] });
  const it = child.stdout[Symbol.asyncIterator]();
  const lat = [];
  for (let i = 0; i < ECHOES; i++) {
    const t0 = process.hrtime.bigint();
    child.stdin.write("a");
    const { value } = await it.next();
    if (value.length !== 1) throw new Error("exec echo: " + value.length);
    lat.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  child.stdin.end();
  await new Promise((r) => child.on("exit", r));
  return median(lat);
}

async function rawEcho(url) {
  const ws = await connect(url);
  const one = Buffer.from("a");
  const lat = [];
  for (let i = 0; i < ECHOES; i++) {
    const t0 = process.hrtime.bigint();
    await new Promise((resolve) => {
      ws.once("message", resolve);
      ws.send(one, { binary: true });
    });
    lat.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  ws.close();
  return median(lat);
}

const srv = await startServer();
const raw = await rawServer();
try {
  const results = { ts: [], exec: [], raw: [] };
  for (let i = 0; i < ROUNDS; i++) {
    results.ts.push(await tsStream(srv.url));
    results.exec.push(await execStream(srv.url));
    results.raw.push(await rawStream(raw.url));
  }
  const echo = { ts: await tsEcho(srv.url), exec: await execEcho(srv.url), raw: await rawEcho(raw.url) };
  console.log(`stdout ${SIZE / (1 << 20)} MiB, median of ${ROUNDS}; 1-byte echo p50 of ${ECHOES}; node ${process.version}`);
  const rows = [
    ["TypeScript client (openProcess)", results.ts, echo.ts],
    ["spawned procwire exec", results.exec, echo.exec],
    ["raw ws binary messages", results.raw, echo.raw],
  ];
  for (const [name, xs, p50] of rows) {
    console.log(`${name.padEnd(34)} ${median(xs).toFixed(0).padStart(6)} MB/s   echo p50 ${p50.toFixed(0).padStart(6)} µs`);
  }
} finally {
  raw.stop();
  await srv.stop();
}
