// Tests of the transform, natively: `node --test`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ConfigError, parseConfig, solarize, uniform } from "./transform.js";

test("solarizes at and above the threshold", () => {
  assert.deepEqual([...solarize(Uint8Array.from([0, 127, 128, 255]), 128)], [0, 127, 127, 0]);
});

test("the generator is the SDK's SplitMix64", () => {
  assert.equal(uniform(0n), Number(0xe220a8397b1dcdafn >> 40n) / 16777216);
});

test("configurations", () => {
  assert.deepEqual(parseConfig("{}"), { threshold: 128, p: 1 });
  assert.deepEqual(parseConfig('{"threshold": 10, "p": 0.5}'), { threshold: 10, p: 0.5 });
  assert.throws(() => parseConfig('{"threshold": 300}'), ConfigError);
  assert.throws(() => parseConfig('{"q": 1}'), ConfigError);
});
