// npm run bench: the TypeScript client against the Go client and a raw
// `ws` client, interleaved in one run, on the same machine, children and
// servers: stdout throughput (head -c SIZE /dev/zero, MB/s from open to
// EOF) and the 1-byte echo through cat (p50). The TypeScript and Go
// clients speak to `procwire serve`; the raw client speaks to the
// raw-WebSocket server bench/ measures procwire against ("W": the child's
// stdout as binary messages, no framing, no flow control, no replay),
// served by js/bench/gopeer. Prints the figures and the ratios README
// quotes.
import { spawn, execFileSync } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import WebSocket from "ws";
import { openProcess } from "../dist/index.js";
import { build, repo, startServer, req, instance } from "../test/helpers.mjs";

const SIZE = Number(process.env.BENCH_BYTES ?? 256 << 20);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ECHOES = Number(process.env.BENCH_ECHOES ?? 2000);
const BLOCKS = 5; // echo runs interleaved in blocks of ECHOES / BLOCKS

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mbps = (bytes, ns) => bytes / 1e6 / (Number(ns) / 1e9);

// gopeer is built once, next to procwire (build() of the test helpers).
function gopeer() {
  const { procwire } = build();
  const out = join(procwire, "..", "gopeer");
  execFileSync(process.env.GO ?? "go", ["build", "-o", out, "./js/bench/gopeer"], { cwd: repo, stdio: "inherit" });
  return out;
}

async function rawServer(bin) {
  const child = spawn(bin, ["raw"], { stdio: ["pipe", "pipe", "inherit"] });
  const url = await new Promise((r) => createInterface({ input: child.stdout }).once("line", r));
  return { url, stop: () => child.stdin.end() };
}

function run(bin, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${args[0]}: exit ${code}`))));
  });
}

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

async function goStream(bin, url) {
  return Number(await run(bin, ["stream", url, String(SIZE)]));
}

function rawURL(base, argv) {
  return base + "?" + argv.map((a) => "arg=" + encodeURIComponent(a)).join("&");
}

function connect(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.binaryType = "nodebuffer";
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

async function rawStream(base) {
  const ws = await connect(rawURL(base, ["head", "-c", String(SIZE), "/dev/zero"]));
  const t0 = process.hrtime.bigint();
  let n = 0;
  await new Promise((resolve, reject) => {
    ws.on("message", (d) => (n += d.length));
    ws.once("close", resolve);
    ws.once("error", reject);
  });
  const dt = process.hrtime.bigint() - t0;
  if (n !== SIZE) throw new Error(`raw: ${n} bytes`);
  return mbps(n, dt);
}

async function tsEcho(url, count) {
  const p = await openProcess(url, instance("bench-echo"), req("cat"));
  const w = p.input.getWriter();
  const r = p.output.getReader();
  const one = new Uint8Array([0x61]);
  const lat = [];
  for (let i = 0; i < count; i++) {
    const t0 = process.hrtime.bigint();
    await w.write(one);
    const { value } = await r.read();
    if (value.length !== 1) throw new Error("ts echo: " + value.length);
    lat.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  await p.destroy();
  return lat;
}

async function goEcho(bin, url, count) {
  return (await run(bin, ["echo", url, String(count)])).trim().split("\n").map(Number);
}

async function rawEcho(base, count) {
  const ws = await connect(rawURL(base, ["cat"]));
  const one = Buffer.from("a");
  const lat = [];
  for (let i = 0; i < count; i++) {
    const t0 = process.hrtime.bigint();
    await new Promise((resolve) => {
      ws.once("message", resolve);
      ws.send(one, { binary: true });
    });
    lat.push(Number(process.hrtime.bigint() - t0) / 1e3);
  }
  ws.close();
  return lat;
}

const bin = gopeer();
const srv = await startServer();
const raw = await rawServer(bin);
try {
  const stream = { ts: [], go: [], raw: [] };
  for (let i = 0; i < ROUNDS; i++) {
    // Interleaved, in a rotating order, so that drift of a shared machine
    // falls on all three alike.
    const order = [
      ["ts", () => tsStream(srv.url)],
      ["go", () => goStream(bin, srv.url)],
      ["raw", () => rawStream(raw.url)],
    ];
    for (let k = 0; k < 3; k++) {
      const [name, f] = order[(i + k) % 3];
      stream[name].push(await f());
    }
  }
  const echo = { ts: [], go: [], raw: [] };
  const per = Math.ceil(ECHOES / BLOCKS);
  for (let b = 0; b < BLOCKS; b++) {
    echo.ts.push(...(await tsEcho(srv.url, per)));
    echo.go.push(...(await goEcho(bin, srv.url, per)));
    echo.raw.push(...(await rawEcho(raw.url, per)));
  }
  const s = { ts: median(stream.ts), go: median(stream.go), raw: median(stream.raw) };
  const e = { ts: median(echo.ts), go: median(echo.go), raw: median(echo.raw) };
  console.log(`stdout ${SIZE / (1 << 20)} MiB, median of ${ROUNDS} interleaved rounds; 1-byte echo p50 of ${BLOCKS * per} each, interleaved in ${BLOCKS} blocks; node ${process.version}`);
  const rows = [
    ["TypeScript client (openProcess)", s.ts, e.ts],
    ["Go client (client.Open)", s.go, e.go],
    ["raw ws client against W", s.raw, e.raw],
  ];
  for (const [name, mb, p50] of rows) {
    console.log(`${name.padEnd(34)} ${mb.toFixed(0).padStart(6)} MB/s   echo p50 ${p50.toFixed(1).padStart(7)} µs`);
  }
  console.log(`stdout: TS/raw ${(s.ts / s.raw).toFixed(2)}× (goal ≥ 0.8), TS/Go ${(s.ts / s.go).toFixed(2)}× (goal ≥ 0.9)`);
  console.log(`echo p50: TS − raw ${(e.ts - e.raw).toFixed(1)} µs (goal ≤ 15), TS − Go ${(e.ts - e.go).toFixed(1)} µs`);
} finally {
  raw.stop();
  await srv.stop();
}
