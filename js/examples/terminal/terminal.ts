// A terminal in the browser: xterm.js on a remote pseudo-terminal opened
// with the procwire TypeScript client over the browser's own WebSocket.
// Keys go to the process's stdin as bytes, the terminal's output is written
// to xterm as it comes, and xterm's size (fitted to the page) follows the
// window. A cut connection resumes on its own, byte-exact: nothing typed
// or printed is lost or repeated.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import "@xterm/xterm/css/xterm.css";
import { openProcess, type ProcessHandle } from "@procwire/client";

/** What connect needs; the token comes from the form or the caller, never the URL. */
export interface ConnectOptions {
  url: string;
  token?: string;
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  instance?: string;
}

const params = new URLSearchParams(location.search);
const term = new Terminal({
  scrollback: Number(params.get("scrollback") ?? 10_000),
  fontFamily: "DejaVu Sans Mono, monospace",
  fontSize: 14,
  cursorBlink: true,
});
const fit = new FitAddon();
term.loadAddon(fit);
term.open(document.getElementById("terminal")!);
fit.fit();
const status = document.getElementById("status")!;

let handle: ProcessHandle | undefined;
// Every byte of output, in order, for whoever checks the transcript.
const received: Uint8Array[] = [];
let receivedBytes = 0;

async function connect(o: ConnectOptions): Promise<void> {
  if (handle) throw new Error("already connected");
  const instance = o.instance ?? `terminal-${crypto.randomUUID()}`;
  const h = await openProcess(
    o.url,
    instance,
    {
      executable: o.command ?? "sh",
      arguments: o.args ?? [],
      working_directory: "/",
      environment: { PATH: "/usr/local/bin:/usr/bin:/bin", ...o.env },
    },
    {
      token: o.token || undefined,
      WebSocket: globalThis.WebSocket,
      reconnectMin: 20,
      reconnectMax: 500,
      tty: { rows: term.rows, cols: term.cols, term: "xterm-256color" },
    },
  );
  handle = h;
  (document.querySelector("input[name=url]") as HTMLInputElement).value = o.url;
  status.textContent = `connected: process ${h.processId}`;
  const writer = h.input.getWriter();
  const enc = new TextEncoder();
  // onData is keystrokes (and pastes) as a string; onBinary is what xterm
  // sends as raw bytes (some mouse reports).
  term.onData((d) => void writer.write(enc.encode(d)).catch(() => {}));
  term.onBinary((d) => void writer.write(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)).catch(() => {}));
  term.onResize(({ rows, cols }) => h.resize(rows, cols));
  void (async () => {
    const reader = h.output.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      received.push(value);
      receivedBytes += value.length;
      term.write(value);
    }
  })();
  h.wait().then(
    (exit) => {
      const how = exit.signal ?? `exit ${exit.code}`;
      status.textContent = `process ended: ${how}`;
      term.write(`\r\n[process ended: ${how}]\r\n`);
    },
    (err: unknown) => {
      status.textContent = `lost: ${String(err)}`;
    },
  );
  term.focus();
}

/** The lines of xterm's buffer (scrollback and screen), trailing spaces trimmed. */
function lines(): string[] {
  const b = term.buffer.active;
  const out: string[] = [];
  for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? "");
  return out;
}

/** The output received so far, as text. */
function transcript(): string {
  const all = new Uint8Array(receivedBytes);
  let at = 0;
  for (const c of received) {
    all.set(c, at);
    at += c.length;
  }
  return new TextDecoder().decode(all);
}

window.addEventListener("resize", () => fit.fit());
document.getElementById("connect")!.addEventListener("submit", (e) => {
  e.preventDefault();
  const f = new FormData(e.target as HTMLFormElement);
  connect({ url: String(f.get("url")), token: String(f.get("token")), command: String(f.get("command") || "sh") }).catch((err: unknown) => {
    status.textContent = `failed: ${String(err)}`;
  });
});

// For scripts and tests: the same operations as the form, and what the
// terminal shows.
declare global {
  interface Window {
    procwireTerminal: {
      connect(o: ConnectOptions): Promise<void>;
      lines(): string[];
      transcript(): string;
      size(): { rows: number; cols: number };
      progress(): ReturnType<ProcessHandle["progress"]> | undefined;
      flush(): Promise<void>;
    };
  }
}
window.procwireTerminal = {
  connect,
  lines,
  transcript,
  size: () => ({ rows: term.rows, cols: term.cols }),
  progress: () => handle?.progress(),
  // Resolves once xterm has parsed everything written to it so far.
  flush: () => new Promise<void>((r) => term.write("", r)),
};
