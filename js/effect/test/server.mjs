// The real procwire server for the adapter's tests, run as a child whose
// pid the tests need (to freeze it with SIGSTOP).
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { build, req } from "../../test/helpers.mjs";

export { instance, req } from "../../test/helpers.mjs";

/** Runs `procwire serve` on a free loopback port: { url, pid, stop }. */
export function startServer(args = []) {
  const { procwire } = build();
  const child = spawn(procwire, ["serve", "--addr", "127.0.0.1:0", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  return new Promise((resolve, reject) => {
    const rl = createInterface({ input: child.stderr });
    rl.on("line", (line) => {
      log += line + "\n";
      const m = /url=(ws:\/\/\S+)/.exec(line);
      if (m) {
        resolve({
          url: m[1],
          pid: child.pid,
          log: () => log,
          stop: () => {
            if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
            return new Promise((r) => {
              child.on("exit", () => r());
              child.kill("SIGCONT");
              child.kill("SIGTERM");
            });
          },
        });
      }
    });
    child.on("exit", (code) => reject(new Error(`procwire serve exited with ${code}:\n${log}`)));
  });
}

/** Whether a process with pid exists (and is not a zombie). */
export function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !/\) Z /.test(stat);
  } catch {
    return false;
  }
}

/**
 * A request with a unique marker in its environment, which every
 * descendant inherits: { request, mark }. The child runs in a PID namespace
 * of its own, so its `$$` is no pid of ours; the mark names it.
 */
export function marked(executable, ...args) {
  const request = req(executable, ...args);
  const mark = `PROCWIRE_TEST_MARK=${process.pid}-${Math.random().toString(16).slice(2)}`;
  const [k, v] = mark.split("=");
  request.environment[k] = v;
  return { request, mark };
}

/** Whether a live process holds mark in its environment (a zombie has none left). */
export function markedAlive(mark) {
  for (const name of readdirSync("/proc")) {
    if (!/^[0-9]+$/.test(name)) continue;
    let env;
    try {
      env = readFileSync(`/proc/${name}/environ`, "latin1");
    } catch {
      continue;
    }
    if (env.split("\0").includes(mark)) return true;
  }
  return false;
}

/** Polls cond every 10 ms until it holds or ms pass; resolves with whether it held. */
export async function eventually(cond, ms) {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Whether every thread of pid is stopped (state T): kill(SIGSTOP) returns
 * before the signal has stopped a multi-threaded process.
 */
export function stopped(pid) {
  try {
    return readdirSync(`/proc/${pid}/task`).every((tid) => /\) [Tt] /.test(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")));
  } catch {
    return false;
  }
}
