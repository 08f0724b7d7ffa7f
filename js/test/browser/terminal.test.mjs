// The browser terminal (examples/terminal/): Debian's chromium, headless,
// driven by playwright-core, loads the example page (xterm.js, its fit
// addon and the TypeScript client, bundled by esbuild) from a loopback HTTP
// server of its own, and connects it to `procwire serve --token-file`
// behind the repository's cutting proxy, the token as the procwire.bearer
// subprotocol. It types into xterm as a person does, and reads xterm's
// buffer: `stty size; tty`, a resize of the page followed by `stty size`,
// ^C into `sleep 100`, and `seq 100000` while the connection is cut, every
// line arriving once. It leaves a screenshot at artifacts/terminal.png
// (CI keeps it). Under CI=true a missing chromium fails the test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomBytes } from "node:crypto";
import { CHROMIUM, openTab } from "./chromium.mjs";
import { startServer, startCutProxy, instance } from "../helpers.mjs";
import { buildTerminal } from "../../examples/terminal/build.mjs";

const here = fileURLToPath(new URL(".", import.meta.url));
const example = join(here, "../../examples/terminal");
export const SCREENSHOT = join(here, "artifacts", "terminal.png");
const PROMPT = "rsh$ ";
const LINES = 100000;

const missing = !existsSync(CHROMIUM);
if (missing && process.env.CI === "true") {
  test("chromium is installed (CI=true)", () => {
    assert.fail(`${CHROMIUM} is missing: .ci/run installs it with apt-get (package chromium)`);
  });
}

// until polls f (in the test, not the page) until it returns a truthy
// value, within ms.
async function until(what, f, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25)); // polling, not synchronisation
  }
}

// running reports whether a process with exactly argv runs on this machine
// (the server is local).
function running(...argv) {
  const want = argv.join("\0") + "\0";
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, "latin1") === want) return Number(e);
    } catch {
      // gone meanwhile
    }
  }
  return 0;
}

function seqCRLF(n) {
  let s = "";
  for (let i = 1; i <= n; i++) s += `${i}\r\n`;
  return s;
}

test("chromium: xterm.js on a remote terminal: size, resize, ^C, seq 100000 across cuts, a screenshot", { skip: missing && `${CHROMIUM} is missing (apt-get install chromium)`, timeout: 240_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "procwire-terminal-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));

  // The page: the example as it is, its bundle built into dir.
  const dist = await buildTerminal(join(dir, "dist"));
  const files = {
    "/": ["text/html", readFileSync(join(example, "index.html"))],
    "/dist/terminal.js": ["text/javascript", readFileSync(join(dist, "terminal.js"))],
    "/dist/terminal.css": ["text/css", readFileSync(join(dist, "terminal.css"))],
  };
  const http = createServer((req, res) => {
    const f = files[new URL(req.url, "http://x").pathname];
    if (f) {
      res.writeHead(200, { "content-type": f[0] });
      res.end(f[1]);
    } else {
      res.writeHead(req.url === "/favicon.ico" ? 204 : 404).end();
    }
  });
  await new Promise((r) => http.listen(0, "127.0.0.1", r));
  t.after(() => {
    http.closeAllConnections();
    return new Promise((r) => http.close(r));
  });
  const page = `127.0.0.1:${http.address().port}`;

  const token = randomBytes(24).toString("hex");
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, token, { mode: 0o600 });
  const srv = await startServer(["--token-file", tokenFile, "--allow-origin", page, "--grace", "30s"]);
  t.after(() => srv.stop());
  const proxy = await startCutProxy(srv.addr);
  t.after(() => proxy.stop());

  const { tab, logs } = await openTab(t, dir, `http://${page}/?scrollback=${LINES + 20000}`, { viewport: { width: 1000, height: 640 } });
  await tab.waitForFunction(() => window.procwireTerminal !== undefined, null, { timeout: 30_000 });

  const lines = () => tab.evaluate(() => window.procwireTerminal.lines());
  const size = () => tab.evaluate(() => window.procwireTerminal.size());
  const screen = async () => (await lines()).filter((l) => l !== "");
  const prompts = async () => (await lines()).filter((l) => l.startsWith(PROMPT)).length;
  // typeLine types a command and Enter, as a person does, and waits for
  // the prompt that follows it.
  const typeLine = async (text) => {
    const n = await prompts();
    await tab.keyboard.type(text);
    await tab.keyboard.press("Enter");
    return until(`the prompt after ${JSON.stringify(text)}`, async () => (await prompts()) > n && (await lines()));
  };

  await tab.evaluate((o) => window.procwireTerminal.connect(o), {
    url: `ws://${proxy.addr}/`,
    token,
    command: "sh",
    env: { PS1: PROMPT },
    instance: instance("terminal"),
  });
  await until("the first prompt", async () => (await prompts()) === 1);
  await tab.click("#terminal");

  // stty size and tty: the remote terminal is xterm's size.
  const s0 = await size();
  let out = await typeLine("stty size; tty");
  assert.ok(out.includes(`${s0.rows} ${s0.cols}`), `stty size says ${s0.rows} ${s0.cols}: ${out.filter(Boolean).slice(-6).join(" | ")}`);
  assert.ok(out.some((l) => /^\/dev\/pts\/\d+$/.test(l)), "tty names a pseudo-terminal");

  // A smaller page: the fit addon resizes xterm, the client sends resize,
  // stty size follows.
  await tab.setViewportSize({ width: 640, height: 420 });
  const s1 = await until("xterm to fit the smaller page", async () => {
    const s = await size();
    return s.rows !== s0.rows && s.cols !== s0.cols && s;
  });
  out = await typeLine("stty size");
  assert.ok(out.includes(`${s1.rows} ${s1.cols}`), `stty size says ${s1.rows} ${s1.cols} after the resize: ${out.filter(Boolean).slice(-4).join(" | ")}`);

  // ^C into sleep 100: sleep ends, the shell goes on.
  const n = await prompts();
  await tab.keyboard.type("sleep 100");
  await tab.keyboard.press("Enter");
  const pid = await until("sleep 100 to run", () => running("sleep", "100"));
  await tab.keyboard.press("Control+C");
  await until("sleep 100 to end", () => !existsSync(`/proc/${pid}/cmdline`) || !readFileSync(`/proc/${pid}/cmdline`, "latin1").startsWith("sleep"));
  await until("the prompt after ^C", async () => (await prompts()) > n);
  out = await typeLine("echo alive $((6*7))");
  assert.ok(out.includes("alive 42"), "the shell survived ^C");

  // seq 100000 while the proxy cuts the connection twice: on the wire the
  // output is about 920 kB (base64 in JSON), counted from now both ways.
  const before = await tab.evaluate(() => window.procwireTerminal.transcript().length);
  const conns0 = (await tab.evaluate(() => window.procwireTerminal.progress())).connections;
  await proxy.cmd("cutat 250000 600000");
  await typeLine(`seq ${LINES}`);
  const cuts = Number((await proxy.cmd("cuts")).replace(/^cuts /, ""));
  const transcript = await tab.evaluate((b) => window.procwireTerminal.transcript().slice(b), before);
  const start = transcript.indexOf(`seq ${LINES}\r\n`) + `seq ${LINES}\r\n`.length;
  const body = transcript.slice(start, transcript.indexOf(PROMPT, start));
  const want = seqCRLF(LINES);
  assert.equal(body.length, want.length, "the bytes of seq's output");
  assert.ok(body === want, "every line of seq once, in order, in the bytes received");
  const all = await lines();
  const first = all.indexOf("1");
  const shown = all.slice(first, first + LINES);
  let wrong = -1;
  for (let i = 0; i < LINES && wrong < 0; i++) if (shown[i] !== String(i + 1)) wrong = i;
  assert.equal(wrong, -1, `xterm's buffer: line ${wrong + 1} is ${JSON.stringify(shown[wrong])}`);
  const conns = (await tab.evaluate(() => window.procwireTerminal.progress())).connections;
  assert.equal(cuts, 2, "the proxy cut the connection twice");
  assert.ok(conns >= conns0 + 2, `${conns - conns0} more connections: each cut was resumed`);

  // Something to look at, and the screenshot CI keeps.
  // (clear empties the scrollback too: wait for the text, not a count.)
  await tab.keyboard.type("clear; echo procwire terminal; stty size; tty; ls /usr");
  await tab.keyboard.press("Enter");
  await until("the screenshot's text", async () => {
    const l = await screen();
    return l.includes("procwire terminal") && l[l.length - 1].startsWith(PROMPT);
  });
  await tab.evaluate(() => window.procwireTerminal.flush());
  mkdirSync(join(here, "artifacts"), { recursive: true });
  await tab.screenshot({ path: SCREENSHOT });

  await tab.keyboard.type("exit 7");
  await tab.keyboard.press("Enter");
  await until("the exit", async () => (await screen()).some((l) => l.includes("[process ended: exit 7]")));
  assert.ok(!srv.log().includes(token), "the token is never logged");
  console.log(
    `# terminal: seq ${LINES}: ${LINES} lines arrived once each across ${cuts} cuts (${conns} connections); ` +
      `sizes ${s0.rows}x${s0.cols} then ${s1.rows}x${s1.cols}; screenshot ${SCREENSHOT}`,
  );
  if (logs.length) console.log("# page console: " + logs.slice(0, 5).join(" | "));
});
