// The client's errors against the shared table frames/testdata/client-errors.json,
// which the Go client's test reads too: both map every condition identically.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  contractError,
  sandboxError,
  SandboxError,
  SandboxOperationFailed,
  SandboxLifecycleConflict,
  SandboxCapabilityUnavailable,
  SandboxInstanceNotFound,
} from "../dist/index.js";
import * as api from "../dist/index.js";

const table = JSON.parse(readFileSync(new URL("../../frames/testdata/client-errors.json", import.meta.url), "utf8"));
const FIELDS = ["operation", "reason", "expected", "actual", "requirement", "gap", "serverMessage", "frame"];

test("every condition of client-errors.json maps to exactly its error", () => {
  assert.ok(table.conditions.length >= 11);
  for (const c of table.conditions) {
    const cause = new Error("underneath");
    const e = contractError(c.condition, c.operation, { cause });
    const want = c.error;
    assert.ok(e instanceof SandboxError, c.condition);
    assert.ok(e instanceof api[want._tag], `${c.condition}: instanceof ${want._tag}`);
    assert.equal(e._tag, want._tag, c.condition);
    assert.equal(e.name, want._tag, c.condition);
    assert.ok(Object.getOwnPropertyDescriptor(e, "_tag")?.enumerable, `${c.condition}: _tag is an own enumerable property`);
    for (const k of FIELDS) {
      if (k in want) {
        assert.equal(e[k], want[k], `${c.condition}.${k}`);
        assert.ok(Object.hasOwn(e, k), `${c.condition}.${k} is an own property`);
      } else {
        assert.ok(!Object.hasOwn(e, k) && e[k] === undefined, `${c.condition}.${k} absent, got ${e[k]}`);
      }
    }
    assert.equal(e.cause, cause);
    // The fields survive a structured clone of their own data.
    const plain = Object.fromEntries(Object.entries(e));
    assert.equal(plain._tag, want._tag);
  }
});

test("an unknown condition is a RangeError", () => {
  assert.throws(() => contractError("nope", "open_process"), RangeError);
});

test("the client never authors SandboxProtocolInvalid, nor the old classes", () => {
  for (const name of ["SandboxProtocolInvalid", "ConnectionLost", "Destroyed", "ProcwireError"]) {
    assert.equal(api[name], undefined, name);
  }
});

test("sandboxError keeps the server's fields and names the tag", () => {
  const frame = { type: "error", code: "SandboxLifecycleConflict", operation: "signal_process", expected: "running", actual: "process_exited", message: "gone" };
  const e = sandboxError(frame);
  assert.ok(e instanceof SandboxLifecycleConflict);
  assert.equal(e._tag, "SandboxLifecycleConflict");
  assert.equal(e.operation, "signal_process");
  assert.equal(e.expected, "running");
  assert.equal(e.actual, "process_exited");
  assert.equal(e.serverMessage, "gone");
  assert.equal(e.frame, frame);
  assert.ok(!Object.hasOwn(e, "reason") && !Object.hasOwn(e, "requirement"));
  const cap = sandboxError({ type: "error", code: "SandboxCapabilityUnavailable", requirement: "pty" });
  assert.ok(cap instanceof SandboxCapabilityUnavailable);
  assert.equal(cap.requirement, "pty");
  assert.ok(!Object.hasOwn(cap, "operation"));
  assert.ok(sandboxError({ type: "error", code: "SandboxInstanceNotFound" }) instanceof SandboxInstanceNotFound);
  const odd = sandboxError({ type: "error", code: "SandboxSomethingNew", operation: "wait_process" });
  assert.ok(odd instanceof SandboxOperationFailed);
  assert.equal(odd._tag, "SandboxOperationFailed");
  assert.equal(odd.reason, "protocol_violation");
  assert.equal(odd.operation, "wait_process");
});

test("constructors take the contract's fields", () => {
  const e = new SandboxOperationFailed({ operation: "destroy_process", reason: "timed_out" });
  assert.deepEqual({ ...e }, { _tag: "SandboxOperationFailed", operation: "destroy_process", reason: "timed_out" });
  const l = new SandboxLifecycleConflict({ operation: "write_stdin", actual: "stdin_closed" });
  assert.deepEqual({ ...l }, { _tag: "SandboxLifecycleConflict", operation: "write_stdin", actual: "stdin_closed" });
  assert.ok(l instanceof Error && l instanceof SandboxError);
});
