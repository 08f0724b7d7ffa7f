// @procwire/effect against the real server: an ACP-shaped session through
// cat, interruption of the scope and of a stdin fiber, a release against a
// frozen server, terminate on a child that ignores SIGTERM, tagged errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Cause, Effect, Exit, Fiber, Stream } from "effect";
import { openProcess } from "@procwire/effect";
import { startServer, instance, req, marked, markedAlive, eventually, stopped } from "./server.mjs";

let srv;
before(async () => {
  srv = await startServer(["--grace", "60s"]);
});
after(async () => {
  await srv?.stop();
});

const enc = new TextEncoder();
const run = (eff) => Effect.runPromise(eff);
const runExit = (eff) => Effect.runPromiseExit(eff);

// acpLines returns 300 NDJSON lines shaped like ACP (JSON-RPC 2.0) messages,
// from about 100 bytes up to exactly 1 MiB each.
function acpLines() {
  const lines = [];
  let x = 7;
  for (let i = 0; i < 300; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    let size = 100 + (x % 4000);
    if (i % 25 === 0) size = 256 * 1024 + (x % (512 * 1024));
    if (i === 150 || i === 299) size = 1 << 20;
    const head = JSON.stringify({ jsonrpc: "2.0", id: i, method: "session/update", params: { sessionId: "s-1", update: { text: "" } } });
    const pad = size - head.length - 1; // the padding goes into text; the line ends in \n
    const text = Array.from({ length: pad }, (_, k) => String.fromCharCode(97 + ((k * 7 + i) % 26))).join("");
    const line = head.replace('"text":""', `"text":"${text}"`) + "\n";
    assert.equal(Buffer.byteLength(line), size);
    lines.push(enc.encode(line));
  }
  return lines;
}

test("an ACP-shaped NDJSON session through cat: 300 lines up to 1 MiB, byte-exact", async () => {
  const lines = acpLines();
  const sent = Buffer.concat(lines);
  const { got, exit, evidence, wait2 } = await run(
    Effect.scoped(
      Effect.gen(function* () {
        const p = yield* openProcess(srv.url, instance("acp"), req("cat"));
        const writer = yield* Effect.forkChild(Stream.fromIterable(lines).pipe(Stream.run(p.stdin)));
        const chunks = yield* Stream.runCollect(p.stdout);
        yield* Fiber.join(writer);
        const exit = yield* p.wait;
        const wait2 = yield* p.wait;
        return { got: Buffer.concat(chunks), exit, evidence: p.evidence, wait2 };
      }),
    ),
  );
  assert.equal(got.length, sent.length);
  assert.ok(got.equals(sent), "stdout is stdin, byte for byte");
  const parsed = got.toString("utf8").split("\n").slice(0, -1).map((l) => JSON.parse(l));
  assert.equal(parsed.length, 300);
  assert.deepEqual(parsed.map((m) => m.id), [...Array(300).keys()]);
  assert.deepEqual(exit, { code: 0 });
  assert.equal(wait2, exit, "wait settles once: the same exit on every run");
  assert.equal(evidence.executable, "cat");
  console.log(`# acp: ${lines.length} lines, ${sent.length} bytes, largest ${Math.max(...lines.map((l) => l.length))}`);
});

test("interrupting the scope mid-stream destroys the process within the bound", async () => {
  const { request, mark } = marked("sh", "-c", "exec yes procwire");
  let seen = 0;
  const fiber = Effect.runFork(
    Effect.scoped(
      Effect.gen(function* () {
        const p = yield* openProcess(srv.url, instance("interrupt"), request);
        yield* p.stdout.pipe(
          Stream.runForEach((chunk) =>
            Effect.sync(() => {
              seen += chunk.length;
            }),
          ),
        );
      }),
    ),
  );
  assert.ok(await eventually(() => seen > 1 << 20, 10_000), "stdout flows");
  assert.ok(await eventually(() => markedAlive(mark), 5_000), "the child runs");
  const t0 = performance.now();
  await run(Fiber.interrupt(fiber));
  const ms = performance.now() - t0;
  // The release is bounded at 30 s; a live server destroys at once.
  assert.ok(ms < 30_000, `the scope ended after ${ms} ms`);
  assert.ok(await eventually(() => !markedAlive(mark), 5_000), "the child is gone after the release");
  console.log(`# interrupt: ${seen} bytes read, release took ${ms.toFixed(0)} ms`);
});

test("a server frozen during release: the scope ends within 30 s with SandboxOperationFailed{destroy_process, timed_out}", async () => {
  const frozen = await startServer(["--grace", "3s"]);
  const { request, mark } = marked("sh", "-c", "echo started; exec cat");
  let proc;
  try {
    let t0;
    const exit = await runExit(
      Effect.scoped(
        Effect.gen(function* () {
          const p = yield* openProcess(frozen.url, instance("frozen"), request);
          proc = p;
          yield* p.stdout.pipe(Stream.take(1), Stream.runCollect); // started
          process.kill(frozen.pid, "SIGSTOP");
          // Leave the scope only once the server is frozen, not while a
          // thread of it may still answer the destroy.
          assert.ok(yield* Effect.promise(() => eventually(() => stopped(frozen.pid), 10_000)), "the server stopped");
          t0 = performance.now();
        }),
      ),
    );
    const ms = performance.now() - t0;
    assert.ok(Exit.isFailure(exit), "the release failed");
    const err = Cause.squash(exit.cause);
    assert.equal(err._tag, "SandboxOperationFailed");
    assert.equal(err.operation, "destroy_process");
    assert.equal(err.reason, "timed_out");
    // The bound the issue asks for: 30 s, with 5 s of margin for a loaded machine.
    assert.ok(ms >= 29_000 && ms < 35_000, `the scope ended after ${ms} ms`);
    console.log(`# frozen: the release gave up after ${ms.toFixed(0)} ms`);
    assert.ok(await eventually(() => markedAlive(mark), 5_000), "the frozen server could not destroy the child");
    // Thawed, the same handle destroys it: a fresh attempt after the timed-out one.
    process.kill(frozen.pid, "SIGCONT");
    await proc.raw.handle.destroy();
    assert.ok(await eventually(() => !markedAlive(mark), 10_000), "the child is gone after the retried destroy");
  } finally {
    process.kill(frozen.pid, "SIGCONT");
    await frozen.stop(); // destroys every process it still holds
  }
});

test("terminate on a child that ignores SIGTERM: destroyed after the grace", async () => {
  const { request, mark } = marked("sh", "-c", `trap '' TERM; echo started; while :; do sleep 0.05; done`);
  const r = await run(
    Effect.scoped(
      Effect.gen(function* () {
        const p = yield* openProcess(srv.url, instance("trap"), request);
        yield* p.stdout.pipe(Stream.take(1), Stream.runCollect); // started
        const t0 = performance.now();
        const exit = yield* p.terminate("1 second");
        return { exit, ms: performance.now() - t0, alive: markedAlive(mark) };
      }),
    ),
  );
  assert.equal(r.exit, undefined, "no exit within the grace");
  assert.ok(r.ms >= 1000, `destroyed after ${r.ms} ms, not before the grace`);
  assert.ok(r.ms < 10_000, `terminate took ${r.ms} ms`);
  assert.equal(r.alive, false, "the child is gone once terminate returned");

  // A child that honours SIGTERM: its exit, within the grace.
  const e = await run(
    Effect.scoped(
      Effect.gen(function* () {
        const p = yield* openProcess(srv.url, instance("term"), req("sh", "-c", "echo up; exec sleep 60"));
        yield* p.stdout.pipe(Stream.take(1), Stream.runCollect);
        return yield* p.terminate();
      }),
    ),
  );
  assert.deepEqual(e, { signal: "SIGTERM" });
});

test("interrupting a stdin fiber never destroys the process; a later run writes on and half-closes", async () => {
  const out = await run(
    Effect.scoped(
      Effect.gen(function* () {
        const p = yield* openProcess(srv.url, instance("stdin"), req("cat"));
        const w = yield* Effect.forkChild(Stream.concat(Stream.make(enc.encode("first\n")), Stream.never).pipe(Stream.run(p.stdin)));
        const reader = yield* Effect.forkChild(Stream.runCollect(p.stdout));
        // Wait until cat echoed the first line: the stdin fiber is then blocked on Stream.never.
        yield* Effect.promise(() => eventually(() => p.raw.handle.progress().stdoutReceived >= 6, 10_000));
        yield* Fiber.interrupt(w);
        yield* Stream.make(enc.encode("second\n")).pipe(Stream.run(p.stdin));
        const chunks = yield* Fiber.join(reader);
        return { text: Buffer.concat(chunks).toString(), exit: yield* p.wait };
      }),
    ),
  );
  assert.equal(out.text, "first\nsecond\n");
  assert.deepEqual(out.exit, { code: 0 });
});

test("errors are tagged: catchTag on SandboxLifecycleConflict after destroy", async () => {
  const actual = await run(
    Effect.scoped(
      Effect.gen(function* () {
        const p = yield* openProcess(srv.url, instance("tag"), req("cat"));
        assert.ok(p.raw.input instanceof WritableStream && p.raw.output instanceof ReadableStream);
        yield* p.destroy;
        yield* p.destroy; // idempotent
        return yield* p.signal("SIGINT").pipe(
          Effect.as("delivered"),
          Effect.catchTag("SandboxLifecycleConflict", (e) => Effect.succeed(`${e.operation}:${e.expected}:${e.actual}`)),
        );
      }),
    ),
  );
  assert.equal(actual, "signal_process:running:process_destroyed");
});

test("an interrupted acquire leaves nothing behind: the instance is free again", async () => {
  const inst = instance("acquire");
  for (const after of [0, 1, 5, 20]) {
    const fiber = Effect.runFork(Effect.scoped(Effect.flatMap(openProcess(srv.url, inst, req("cat")), () => Effect.never)));
    await new Promise((r) => setTimeout(r, after));
    await run(Fiber.interrupt(fiber));
  }
  // One process per instance: a leaked process would refuse this open.
  const exit = await run(
    Effect.scoped(
      Effect.gen(function* () {
        const p = yield* openProcess(srv.url, inst, req("cat"));
        yield* Stream.empty.pipe(Stream.run(p.stdin));
        return yield* p.wait;
      }),
    ),
  );
  assert.deepEqual(exit, { code: 0 });
});
