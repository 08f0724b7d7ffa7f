// Codec properties beyond the golden vectors: data frames of every size
// round-trip, and a line that decodes re-encodes to itself when it was
// canonical (strict base64 has one spelling per payload).
import { test } from "node:test";
import assert from "node:assert/strict";
import { decode, encode, inflateS2, DecodeError, MAX_DATA } from "../dist/index.js";
import { pattern } from "./helpers.mjs";

test("data frames round-trip at every size edge", () => {
  for (const n of [1, 2, 3, 4, 5, 6, 7, 100, 65535, 65536, 65537, MAX_DATA - 1, MAX_DATA]) {
    const data = pattern(n, n);
    for (const type of ["stdin", "stdout", "stderr"]) {
      const line = encode({ type, off: 9007199254740991, data });
      const f = decode(line);
      assert.equal(f.type, type);
      assert.equal(f.off, 9007199254740991);
      assert.ok(Buffer.from(f.data).equals(data), `${type} of ${n}`);
      assert.equal(encode(f), line);
    }
  }
  assert.throws(() => decode(encode({ type: "stdout", off: 0, data: pattern(MAX_DATA + 1) }), 1 << 20), (e) => e instanceof DecodeError && e.kind === "out_of_bounds" && e.field === "data");
});

test("one byte changed in a data frame: refused, or decoded to a frame that re-encodes to the changed line", () => {
  let seed = 12345;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) >>> 0;
    return seed % n;
  };
  let refused = 0;
  for (let k = 0; k < 3000; k++) {
    const data = pattern(1 + rand(40), k + 1);
    const line = Buffer.from(encode({ type: "stdout", off: rand(1000), data }));
    const i = rand(line.length - 1);
    const mutated = Buffer.from(line);
    mutated[i] = rand(256);
    let f;
    try {
      f = decode(mutated);
    } catch (e) {
      assert.ok(e instanceof DecodeError, String(e));
      refused++;
      continue;
    }
    // Accepted: only a change that keeps the canonical form may be.
    if (f.type === "stdout") assert.ok(Buffer.from(encode(f)).equals(mutated), `accepted ${mutated.toString()}`);
  }
  assert.ok(refused > 1000);
});

test("s2 blocks of the golden vectors inflate as the Go encoder compressed them", () => {
  // {"type":"stdout","off":4096,...,"enc":"s2"} carries MaxData zero bytes.
  const zeros = decode('{"type":"stdout","off":4096,"data":"gIAQAAARAR0A8/8C","enc":"s2"}');
  const raw = inflateS2(zeros.data, MAX_DATA);
  assert.ok(raw instanceof Uint8Array);
  assert.equal(raw.length, MAX_DATA);
  assert.ok(raw.every((b) => b === 0));
  assert.equal(typeof inflateS2(zeros.data, MAX_DATA - 1), "string", "over the limit: refused before allocating");
  // A literal then a copy of overlapping bytes: "abcabcabca".
  const block = Uint8Array.from([10, 2 << 2, 0x61, 0x62, 0x63, 1 | (3 << 2), 3]);
  assert.equal(Buffer.from(inflateS2(block, 64)).toString(), "abcabcabca");
});

test("exit's optional reason: oom round-trips, anything else is refused", () => {
  const line = '{"type":"exit","signal":"SIGKILL","reason":"oom"}';
  const f = decode(line);
  assert.equal(f.reason, "oom");
  assert.equal(f.signal, "SIGKILL");
  assert.equal(Buffer.from(encode(f)).toString(), line + "\n");
  assert.throws(() => decode('{"type":"exit","signal":"SIGKILL","reason":"OOM"}'), (e) => e instanceof DecodeError && e.kind === "bad_value" && e.field === "reason");
});

test("open.limits and evidence.limits: optional objects of optional bounded integers", () => {
  const open = '{"type":"open","instance_id":"i","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{}},"limits":{"pids":100,"cpu_millicores":1500}}';
  const f = decode(open);
  assert.equal(f.limits.pids, 100);
  assert.equal(f.limits.cpu_millicores, 1500);
  assert.equal(Buffer.from(encode(f)).toString(), open + "\n");
  assert.throws(() => decode(open.replace('"pids":100', '"pids":0')), (e) => e instanceof DecodeError && e.kind === "out_of_bounds" && e.field === "limits.pids");
});
