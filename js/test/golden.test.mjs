// The golden vectors of frames/testdata/golden, run through the TS codec:
// every valid line decodes and re-encodes byte-identically, every invalid
// one is refused with the expected frame, field and kind, and every
// non-canonical one re-encodes to the same canonical line as in Go.
// The last test runs this file again in a child without globalThis.Buffer
// (GOLDEN_NO_BUFFER=1), where the codec decodes base64 without it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";

const Buffer = globalThis.Buffer;
const noBuffer = process.env.GOLDEN_NO_BUFFER === "1";
if (noBuffer) delete globalThis.Buffer;
const { decode, encode, validate, DecodeError, MAX_FIRST_LINE, FRAME_TYPES } = await import("../dist/index.js");

const dir = fileURLToPath(new URL("../../frames/testdata/golden/", import.meta.url));

function lines(name) {
  const b = readFileSync(dir + name);
  const out = [];
  let start = 0;
  for (let i = 0; i < b.length; i++) {
    if (b[i] === 0x0a) {
      out.push(b.subarray(start, i + 1));
      start = i + 1;
    }
  }
  if (start < b.length) out.push(b.subarray(start));
  return out;
}

const records = (name) => lines(name).map((l) => JSON.parse(l.toString("utf8")));

test("golden valid: decode, validate, re-encode byte-identically", () => {
  const types = new Set();
  let n = 0;
  for (const [i, line] of lines("valid.ndjson").entries()) {
    const f = decode(line, MAX_FIRST_LINE);
    types.add(f.type);
    assert.equal(validate(f), undefined, `valid line ${i + 1}: validate`);
    const got = Buffer.from(encode(f), "utf8");
    assert.ok(got.equals(line), `valid line ${i + 1} re-encodes as\n${got.toString().slice(0, 200)}\nwant\n${line.toString().slice(0, 200)}`);
    n++;
  }
  assert.deepEqual([...types].sort(), [...FRAME_TYPES].sort(), "a valid vector of every type");
  console.log(`golden valid: ${n} of ${n} passed`);
});

test("golden noncanonical: re-encodes as the Go codec does", () => {
  let n = 0;
  for (const v of records("noncanonical.ndjson")) {
    const f = decode(v.line);
    assert.equal(encode(f), v.canonical + "\n", v.id);
    assert.notEqual(v.line, v.canonical, v.id);
    n++;
  }
  console.log(`golden noncanonical: ${n} of ${n} passed`);
});

test("golden invalid: refused with the expected frame, field and kind", () => {
  const kinds = new Set();
  const failures = [];
  let n = 0;
  for (const v of records("invalid.ndjson")) {
    kinds.add(v.error.kind);
    const raw = v.line_base64 !== undefined ? Buffer.from(v.line_base64, "base64") : Buffer.from(v.line ?? "", "utf8");
    let err;
    try {
      decode(raw, v.max_line || MAX_FIRST_LINE);
    } catch (e) {
      err = e;
    }
    n++;
    if (!(err instanceof DecodeError)) {
      failures.push(`${v.id}: got ${err}, want a DecodeError`);
      continue;
    }
    const got = { frame: err.frame, field: err.field, kind: err.kind };
    if (JSON.stringify(got) !== JSON.stringify(v.error)) {
      failures.push(`${v.id}: got ${JSON.stringify(got)} (${err.message}), want ${JSON.stringify(v.error)}`);
    }
  }
  assert.deepEqual(failures, []);
  console.log(`golden invalid: ${n} of ${n} passed (${kinds.size} kinds)`);
});

test("the same vectors where there is no Buffer (browsers): the codec's own base64 decoder", { skip: noBuffer }, () => {
  const env = { ...process.env, GOLDEN_NO_BUFFER: "1" };
  delete env.NODE_TEST_CONTEXT; // a plain run, reporting in TAP
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], { env, encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /golden invalid: (\d+) of \1 passed/);
  assert.match(r.stdout, /^# pass 4$/m);
  assert.match(r.stdout, /^# fail 0$/m);
});

test("first_subprotocol.json: the subprotocol carrying each first message, as Go encodes it, and the message re-encoded", async () => {
  const { firstSubprotocol } = await import("../dist/transport.js");
  const vectors = JSON.parse(readFileSync(dir + "first_subprotocol.json", "utf8"));
  assert.ok(vectors.length >= 3);
  for (const v of vectors) {
    assert.equal(firstSubprotocol(v.message), v.subprotocol);
    assert.equal(encode(decode(v.message)), v.message);
  }
  assert.equal(firstSubprotocol("x".repeat(4096)), undefined, "over MAX_FIRST_SUBPROTOCOL: not offered");
});
