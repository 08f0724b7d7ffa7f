// Limits and the OOM reason against the real Go server (issue 21): a
// server with --limit-memory 64MiB, an open's limits option and
// evidence.limits, and a child the OOM killer ends.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { openProcess, SandboxCapabilityUnavailable } from "../dist/index.js";
import { startServer, req, instance } from "./helpers.mjs";

const MEMORY = 64 << 20;
let srv;
let skip; // why this machine cannot run the cases, or undefined
before(async () => {
  try {
    srv = await startServer(["--limit-memory", "64MiB"]);
  } catch (e) {
    // serve refuses a limit the machine cannot enforce, naming it.
    if (!/limit cannot be enforced/.test(String(e))) throw e;
    skip = `this machine cannot enforce --limit-memory: ${String(e).split("\n").find((l) => l.includes("cannot be enforced"))}`;
  }
  // RLIMIT_AS, the last resort, fails allocations: there is no OOM kill.
  if (srv && /limit=memory .*enforced_by=RLIMIT_AS/.test(srv.log())) skip = "memory is enforced by RLIMIT_AS here: no OOM kill to see";
  if (skip && process.env.CI === "true") throw new Error(`under CI=true: ${skip}`);
});
after(async () => {
  await srv?.stop();
});

test("an OOM-killed child: wait() resolves { signal: SIGKILL, reason: oom }; evidence.limits says the limits in force", async (t) => {
  if (skip) return t.skip(skip);
  const p = await openProcess(srv.url, instance(), req("tail", "/dev/zero"), { limits: {} });
  try {
    assert.deepEqual({ ...p.evidence.limits }, { memory: MEMORY });
    assert.ok(Object.isFrozen(p.evidence.limits));
    const exit = await p.wait({ signal: AbortSignal.timeout(60_000) });
    assert.deepEqual(exit, { signal: "SIGKILL", reason: "oom" });
  } finally {
    await p.destroy();
  }
});

test("limits: a tighter memory limit is in force; a looser one, or one the server does not enforce, is refused resources", async (t) => {
  if (skip) return t.skip(skip);
  const p = await openProcess(srv.url, instance(), req("true"), { limits: { memory: 32 << 20 } });
  assert.deepEqual({ ...p.evidence.limits }, { memory: 32 << 20 });
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();

  const plain = await openProcess(srv.url, instance(), req("true"));
  assert.equal(plain.evidence.limits, undefined, "no limits in the evidence of an open without them");
  await plain.destroy();

  for (const limits of [{ memory: MEMORY + 1 }, { pids: 100 }]) {
    await assert.rejects(
      openProcess(srv.url, instance(), req("true"), { limits }),
      (e) => e instanceof SandboxCapabilityUnavailable && e.requirement === "resources",
      JSON.stringify(limits),
    );
  }
});
