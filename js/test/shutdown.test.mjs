// Server shutdown and a server gone: only procwire's own word ends a handle.
import { test } from "node:test";
import assert from "node:assert/strict";
import { openProcess, Destroyed, ConnectionLost } from "../dist/index.js";
import { startServer, req, instance } from "./helpers.mjs";

test("a server shutting down sends exit and destroyed: the handle ends Destroyed with the exit settled", async () => {
  const srv = await startServer();
  const p = await openProcess(srv.url, instance("shutdown"), req("sleep", "600"));
  await srv.stop();
  assert.deepEqual(await p.wait(), { signal: "SIGKILL" });
  await assert.rejects(p.signal("SIGTERM"), Destroyed);
  await p.destroy();
});

test("a server gone without a word: resumes are tried for the grace, then the handle ends ConnectionLost", async () => {
  const srv = await startServer(["--grace", "2s"]);
  const p = await openProcess(srv.url, instance("gone"), req("sleep", "600"), { reconnectMin: 20, reconnectMax: 200, destroyTimeout: 1000 });
  await srv.kill();
  await assert.rejects(p.wait(), ConnectionLost);
  await assert.rejects(p.output.getReader().read(), ConnectionLost);
  // Nothing is left to destroy that the client can reach: destroy settles
  // within its bound, with the loss.
  await assert.rejects(p.destroy(), ConnectionLost);
});
