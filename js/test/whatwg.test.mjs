// The client over a WHATWG WebSocket class (no headers, no pings), in a
// child Node with the experimental global WebSocket.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { startServer } from "./helpers.mjs";

let srv;
before(async () => {
  srv = await startServer();
});
after(async () => {
  await srv?.stop();
});

test("a WHATWG WebSocket class carries 3 MiB through cat byte-exact", async () => {
  const child = fileURLToPath(new URL("whatwg-child.mjs", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, ["--experimental-websocket", "--no-warnings", child, srv.url]);
  assert.deepEqual(JSON.parse(stdout), { n: 3 << 20, same: true, exit: { code: 0 } });
});
