// Test helpers: the real Go server and the repository's cutting proxy,
// built with `go build` into a temporary directory and run on loopback.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

export const repo = fileURLToPath(new URL("../../", import.meta.url));

let dir;
const built = new Map();
// binary builds a command of the repository once per test process and
// returns its path.
function binary(name, pkg) {
  if (built.has(name)) return built.get(name);
  if (!dir) {
    dir = mkdtempSync(join(tmpdir(), "procwire-js-"));
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  const out = join(dir, name);
  execFileSync(process.env.GO ?? "go", ["build", "-o", out, pkg], { cwd: repo, stdio: "inherit" });
  built.set(name, out);
  return out;
}

/** Builds procwire and cutproxy once per test process; returns their paths. */
export function build() {
  return { procwire: binary("procwire", "./cmd/procwire"), cutproxy: binary("cutproxy", "./internal/testkit/cmd/cutproxy") };
}

/**
 * Runs `procwire serve` on a free loopback port with extra flags and
 * resolves with its ws URL and a stop function.
 */
export function startServer(args = []) {
  const { procwire } = build();
  return serve(procwire, ["serve", "--addr", "127.0.0.1:0", ...args]);
}

/**
 * Runs internal/testkit/cmd/stubbornserve, a server whose processes fail their
 * first destroy with processes_survived, like startServer.
 */
export function startStubbornServer(args = []) {
  return serve(binary("stubbornserve", "./internal/testkit/cmd/stubbornserve"), ["-addr", "127.0.0.1:0", ...args]);
}

// serve runs a server command that logs its ws URL as url=... on stderr.
function serve(path, args) {
  const child = spawn(path, args, { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stderr });
    rl.on("line", (line) => {
      log += line + "\n";
      const m = /url=(ws:\/\/\S+)/.exec(line);
      if (m) {
        resolve({
          url: m[1],
          addr: new URL(m[1]).host,
          log: () => log,
          pid: child.pid,
          stop: () => stopChild(child),
          kill: () => stopChild(child, "SIGKILL"),
          // freeze stops the server (SIGSTOP): connections stay up, nothing is answered.
          freeze: () => freeze(child),
          thaw: () => child.kill("SIGCONT"),
        });
      }
    });
    child.on("exit", (code) => reject(new Error(`${path} exited with ${code}:\n${log}`)));
  });
}

// freeze sends SIGSTOP to child and resolves once every one of its threads
// has stopped. The kernel wakes one thread to begin the stop and the others
// stop as they pass through the kernel after it: until then a thread that is
// running (a Go server's network poller, say) can still read a frame and
// answer it, which a test of "no answer" must not see.
async function freeze(child) {
  child.kill("SIGSTOP");
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (threadsStopped(child.pid)) return;
    if (Date.now() > deadline) throw new Error(`pid ${child.pid} not stopped within 10 s of SIGSTOP`);
    await new Promise((r) => setTimeout(r, 1));
  }
}

// threadsStopped reports whether every thread of pid is in the stopped
// state ("T" in /proc/<pid>/task/<tid>/stat, after the command's name).
function threadsStopped(pid) {
  const tasks = `/proc/${pid}/task`;
  for (const tid of readdirSync(tasks)) {
    let stat;
    try {
      stat = readFileSync(`${tasks}/${tid}/stat`, "latin1");
    } catch {
      continue; // a thread that ended
    }
    if (stat[stat.lastIndexOf(")") + 2] !== "T") return false;
  }
  return true;
}

function stopChild(child, signal = "SIGTERM") {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.on("exit", () => resolve());
    child.kill("SIGCONT"); // a frozen server must see the signal
    child.kill(signal);
  });
}

/** Runs the cutting proxy in front of target ("host:port"). */
export function startCutProxy(target) {
  const { cutproxy } = build();
  const child = spawn(cutproxy, ["-target", target], { stdio: ["pipe", "pipe", "inherit"] });
  const rl = createInterface({ input: child.stdout });
  const answers = [];
  let waiting = [];
  rl.on("line", (line) => {
    const w = waiting.shift();
    if (w) w(line);
    else answers.push(line);
  });
  const next = () => (answers.length ? Promise.resolve(answers.shift()) : new Promise((r) => waiting.push(r)));
  const cmd = async (line) => {
    child.stdin.write(line + "\n");
    const a = await next();
    if (a.startsWith("error")) throw new Error(`cutproxy ${line}: ${a}`);
    return a;
  };
  return next().then((first) => ({
    addr: first.replace(/^addr /, ""),
    cmd,
    // freeze stops the proxy (SIGSTOP): the links through it go silent, with no close.
    freeze: () => freeze(child),
    thaw: () => child.kill("SIGCONT"),
    stop: () =>
      new Promise((resolve) => {
        child.on("exit", () => resolve());
        child.kill("SIGCONT");
        child.stdin.end();
      }),
  }));
}

/** Reads a ReadableStream to its end into one Buffer. */
export async function readAll(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return Buffer.concat(chunks);
}

/** A request for the remote process. */
export function req(executable, ...args) {
  return {
    executable,
    arguments: args,
    working_directory: "/tmp",
    environment: { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8" },
  };
}

let seq = 0;
/** A fresh instance id. */
export const instance = (name = "js") => `${name}-${process.pid}-${++seq}`;

/** Deterministic pseudo-random bytes. */
export function pattern(n, seed = 1) {
  const b = Buffer.allocUnsafe(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

/** Writes data to a WritableStream in chunks of size, then closes it. */
export async function writeAll(input, data, size = 256 * 1024) {
  const w = input.getWriter();
  for (let o = 0; o < data.length; o += size) {
    await w.ready;
    await w.write(data.subarray(o, Math.min(data.length, o + size)));
  }
  await w.close();
}
