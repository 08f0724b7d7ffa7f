// The page's script, bundled with esbuild for the browser: the TypeScript
// client over the browser's own WebSocket. The test calls window.procwireRun
// through the DevTools protocol; nothing secret is in the page's URL.
import { openProcess } from "@procwire/client";

// pattern fills b with the bytes of a deterministic stream from offset off
// (the same function on both sides of the check).
function pattern(b, off) {
  for (let i = 0; i < b.length; i++) {
    const n = off + i;
    b[i] = (n * 31 + (n >>> 8) * 7 + (n >>> 16)) & 0xff;
  }
  return b;
}

window.procwireRun = async ({ url, token, instance, total, chunk }) => {
  const t0 = performance.now();
  const h = await openProcess(
    url,
    instance,
    { executable: "cat", arguments: [], working_directory: "/tmp", environment: { PATH: "/usr/bin:/bin" } },
    { token, WebSocket: globalThis.WebSocket, reconnectMin: 20, reconnectMax: 200 },
  );
  const writer = h.input.getWriter();
  const writing = (async () => {
    for (let off = 0; off < total; off += chunk) {
      await writer.write(pattern(new Uint8Array(Math.min(chunk, total - off)), off));
    }
    writer.releaseLock(); // stdin stays open: the test signals cat
  })();
  const reader = h.output.getReader();
  let got = 0;
  let mismatch = -1;
  while (got < total) {
    const { value, done } = await reader.read();
    if (done) break;
    const want = pattern(new Uint8Array(value.length), got);
    for (let i = 0; i < value.length && mismatch < 0; i++) if (value[i] !== want[i]) mismatch = got + i;
    got += value.length;
  }
  await writing;
  const streamed = performance.now() - t0;
  const delivered = await h.signal("SIGTERM");
  const exit = await h.wait();
  await h.destroy();
  await h.destroy(); // settled: the same answer
  reader.releaseLock();
  return {
    bytes: got,
    mismatch,
    streamedMs: Math.round(streamed),
    totalMs: Math.round(performance.now() - t0),
    delivered,
    exit,
    connections: h.progress().connections,
    userAgent: navigator.userAgent,
  };
};
window.procwireReady = true;
