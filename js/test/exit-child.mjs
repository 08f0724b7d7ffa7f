// Run by teardown.test.mjs: opens a process and destroys it ("destroy"),
// or aborts its open once the server answered ("abort"), then returns.
// Nothing may keep the event loop alive: node must exit by itself.
import { openProcess } from "../dist/index.js";

const [url, mode] = process.argv.slice(2);
const request = { executable: "sleep", arguments: ["600"], working_directory: "/tmp", environment: { PATH: "/usr/bin:/bin" } };
if (mode === "destroy") {
  const p = await openProcess(url, `exit-${process.pid}`, request);
  await p.destroy();
} else {
  const ac = new AbortController();
  const { WebSocket } = await import("ws");
  class Aborting extends WebSocket {
    constructor(...args) {
      super(...args);
      this.on("message", () => ac.abort(new Error("aborted")));
    }
  }
  await openProcess(url, `exit-${process.pid}`, request, { WebSocket: Aborting, signal: ac.signal }).then(
    () => {
      throw new Error("opened despite the abort");
    },
    (e) => {
      if (e.message !== "aborted") throw e;
    },
  );
}
