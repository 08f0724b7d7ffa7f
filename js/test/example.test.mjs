// The README's pipeline example, run as written against the real server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { openProcess } from "../dist/index.js";
import { startServer, instance } from "./helpers.mjs";

let srv;
before(async () => {
  srv = await startServer();
});
after(async () => {
  await srv?.stop();
});

test("README: a stream pipeline through a remote tr", async () => {
  const p = await openProcess(srv.url, instance("readme"), {
    executable: "tr",
    arguments: ["a-z", "A-Z"],
    working_directory: "/tmp",
    environment: { PATH: "/usr/bin:/bin" },
  });
  const source = new Blob(["hello\n", "world\n"]).stream();
  let text = "";
  await Promise.all([
    source.pipeTo(p.input),
    p.output.pipeThrough(new TextDecoderStream()).pipeTo(new WritableStream({ write: (s) => { text += s; } })),
  ]);
  assert.equal(text, "HELLO\nWORLD\n");
  assert.deepEqual(await p.wait(), { code: 0 });
  await p.destroy();
});
