// Run by whatwg.test.mjs under node --experimental-websocket: the client
// over the WHATWG WebSocket global (undici's) instead of ws.
import { openProcess } from "../dist/index.js";

const url = process.argv[2];
const p = await openProcess(url, `whatwg-${process.pid}`, {
  executable: "cat",
  arguments: [],
  working_directory: "/tmp",
  environment: { PATH: "/usr/bin:/bin" },
}, { WebSocket: globalThis.WebSocket });
const data = new Uint8Array(3 << 20).map((_, i) => (i * 31) & 0xff);
const w = p.input.getWriter();
const writing = (async () => {
  for (let o = 0; o < data.length; o += 100_000) await w.write(data.subarray(o, o + 100_000));
  await w.close();
})();
let n = 0;
let same = true;
for await (const c of p.output) {
  for (let i = 0; i < c.length; i++) if (c[i] !== data[n + i]) same = false;
  n += c.length;
}
await writing;
const exit = await p.wait();
await p.destroy();
console.log(JSON.stringify({ n, same, exit }));
