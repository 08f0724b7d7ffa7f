// Server shutdown and a server gone: only procwire's own word ends a handle.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openProcess, SandboxLifecycleConflict, SandboxOperationFailed } from "../dist/index.js";
import { startServer, req, instance } from "./helpers.mjs";

test("a server shutting down sends exit and destroyed: the handle ends process_destroyed with the exit settled", async () => {
  const srv = await startServer();
  const p = await openProcess(srv.url, instance("shutdown"), req("sleep", "600"));
  await srv.stop();
  assert.deepEqual(await p.wait(), { signal: "SIGKILL" });
  await assert.rejects(p.signal("SIGTERM"), (e) => e instanceof SandboxLifecycleConflict && e.operation === "signal_process" && e.actual === "process_destroyed");
  await p.destroy();
});

test("a server gone without a word: resumes are tried for the grace, then the handle ends connection_lost", async () => {
  const srv = await startServer(["--grace", "2s"]);
  const p = await openProcess(srv.url, instance("gone"), req("sleep", "600"), { reconnectMin: 20, reconnectMax: 200, destroyTimeout: 1000 });
  await srv.kill();
  await assert.rejects(p.wait(), (e) => e instanceof SandboxOperationFailed && e.operation === "wait_process" && e.reason === "connection_lost");
  await assert.rejects(p.output.getReader().read(), (e) => e instanceof SandboxOperationFailed && e.operation === "read_stdout" && e.reason === "connection_lost");
  // The grace ran out: the server (were it there) expired the process on
  // its own, and destroy says so at once.
  await assert.rejects(p.destroy(), (e) => e instanceof SandboxLifecycleConflict && e.operation === "destroy_process" && e.actual === "process_expired");
});
