// The client's wire constants (src/constants.ts) against Go's package frames,
// as go test ./frames writes them into frames/testdata/golden/constants.json:
// every Go constant there is exported here under its UPPER_SNAKE_CASE name
// with the same value, and src/constants.ts has no constant that is not there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as api from "../dist/index.js";
import * as constants from "../dist/constants.js";

const file = JSON.parse(readFileSync(new URL("../../frames/testdata/golden/constants.json", import.meta.url), "utf8"));

// snake turns a Go name into the TypeScript one: MaxFirstLine → MAX_FIRST_LINE.
const snake = (name) => name.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();

test("every constant of frames/testdata/golden/constants.json is exported with its value", () => {
  const want = { ...file.strings, ...file.bounds, ...file.close_codes, ...file.close_reasons };
  assert.ok(Object.keys(want).length >= 20);
  for (const [goName, value] of Object.entries(want)) {
    const name = snake(goName);
    assert.ok(name in api, `${goName}: the package exports no ${name}`);
    assert.equal(api[name], value, `${name} (Go ${goName})`);
  }
  const names = new Set(Object.keys(want).map(snake));
  for (const name of Object.keys(constants)) {
    assert.ok(names.has(name), `src/constants.ts exports ${name}, which frames/testdata/golden/constants.json lacks`);
  }
});

test("snake", () => {
  assert.equal(snake("MaxFirstLine"), "MAX_FIRST_LINE");
  assert.equal(snake("CloseResumedElsewhere"), "CLOSE_RESUMED_ELSEWHERE");
  assert.equal(snake("Subprotocol"), "SUBPROTOCOL");
  assert.equal(snake("ReasonAttachedToNewer"), "REASON_ATTACHED_TO_NEWER");
});
