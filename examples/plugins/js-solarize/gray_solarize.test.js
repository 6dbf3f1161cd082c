// Tests of the transform itself, natively: `node --test` in this directory.
import assert from "node:assert/strict";
import { test } from "node:test";

import { ConfigError, GraySolarize, Rng } from "./gray_solarize.js";

test("the generator is the SDK's SplitMix64", () => {
  assert.equal(new Rng(0n).nextU64(), 0xe220a8397b1dcdafn);
});

test("grayscale then solarize, by hand", () => {
  const p = new GraySolarize('{"p_gray": 1, "p_solarize": 1}');
  const out = p.applyU8(Uint8Array.from([255, 0, 0, 10, 20, 30]), 3, true, true);
  assert.deepEqual([...out], [76, 76, 76, 18, 18, 18]);
  assert.deepEqual([...p.applyU8(Uint8Array.from([200, 200, 200]), 3, false, true)], [55, 55, 55]);
});

test("bad configurations are errors", () => {
  assert.throws(() => new GraySolarize('{"p_gray": 2}'), ConfigError);
  assert.throws(() => new GraySolarize('{"q": 1}'), ConfigError);
});
