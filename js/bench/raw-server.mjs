// The raw baseline: a bare ws server on loopback. A text message "stream N"
// is answered with N bytes in 256 KiB binary messages; any binary message
// is echoed back. It prints its port on stdout.
import { WebSocketServer } from "ws";

const chunk = Buffer.alloc(256 * 1024);
const wss = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false });
wss.on("listening", () => console.log(wss.address().port));
wss.on("connection", (ws) => {
  ws.on("message", (data, isBinary) => {
    if (isBinary) {
      ws.send(data, { binary: true });
      return;
    }
    let left = Number(/^stream (\d+)$/.exec(data.toString())?.[1] ?? 0);
    const pump = () => {
      // Honour the socket's buffer as a real server would.
      while (left > 0 && ws.bufferedAmount < 4 << 20) {
        const n = Math.min(left, chunk.length);
        ws.send(chunk.subarray(0, n), { binary: true });
        left -= n;
      }
      if (left > 0) setImmediate(pump);
    };
    pump();
  });
});
