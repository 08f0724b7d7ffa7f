// Run by whatwg.test.mjs under node --experimental-websocket: a WHATWG
// WebSocket (no headers, no WebSocket pings) with a token, through a proxy
// that the parent freezes. Protocol on stdio: the child prints "ready",
// the parent freezes the proxy and writes "frozen"; the child reports how
// long after that its dead link was dropped ("dropped <ms>"), the parent
// thaws the proxy and writes "thawed"; the child echoes once more through
// the resumed connection and prints its result as JSON.
import { createInterface } from "node:readline";
import { openProcess } from "../dist/index.js";

const [url, token] = process.argv.slice(2);
setTimeout(() => process.exit(3), 60_000).unref(); // never outlive a parent that gave up
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
let frozenAt = 0;
let droppedAt = 0;
let protocols;
class Watched extends globalThis.WebSocket {
  constructor(u, p) {
    super(u, p);
    protocols ??= p;
  }
  close(...args) {
    if (frozenAt && !droppedAt) droppedAt = Date.now();
    return super.close(...args);
  }
}
const p = await openProcess(url, `whatwg-dead-${process.pid}`, {
  executable: "cat",
  arguments: [],
  working_directory: "/tmp",
  environment: { PATH: "/usr/bin:/bin" },
}, { WebSocket: Watched, token });
const w = p.input.getWriter();
const r = p.output.getReader();
const echo = async (s) => {
  await w.write(new TextEncoder().encode(s));
  let got = "";
  while (!got.endsWith("\n")) got += new TextDecoder().decode((await r.read()).value);
  return got;
};
const first = await echo("one\n");
console.log("ready");
await lines.next(); // frozen
frozenAt = Date.now();
while (!droppedAt) await new Promise((res) => setTimeout(res, 10));
console.log(`dropped ${droppedAt - frozenAt}`);
await lines.next(); // thawed
const second = await echo("two\n");
await w.close();
const exit = await p.wait();
await p.destroy();
console.log(JSON.stringify({ first, second, exit, connections: p.progress().connections, protocols }));
