// `gray_solarize` in JavaScript: the same transform as the Rust example
// (examples/plugins/solarize), the same bits for the same seed and configuration. Plain
// JavaScript (no bindings): plugin.js exports it as the component's world, and
// gray_solarize.test.js tests it with `node --test`.

const MASK = (1n << 64n) - 1n;

/** The SDK's per-element generator (SplitMix64), as `sluice_sdk::Rng`. */
export class Rng {
  constructor(seed) {
    this.state = BigInt.asUintN(64, BigInt(seed));
  }
  nextU64() {
    this.state = (this.state + 0x9e3779b97f4a7c15n) & MASK;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
    return z ^ (z >> 31n);
  }
  /** Uniform in [0, 1): 24 random bits. */
  f32() {
    return Number(this.nextU64() >> 40n) * (1 / 16777216);
  }
}

const f = Math.fround;
const W = [f(0.2989), f(0.587), f(0.114)];
// W[c] * x for every u8 value x, rounded to f32 as an f32 product is.
const TABLES = W.map((w) => Float32Array.from({ length: 256 }, (_, x) => w * x));

export class ConfigError extends Error {}
export class InputError extends Error {}

const KNOWN = ["p_gray", "p_solarize", "threshold"];

export class GraySolarize {
  constructor(config) {
    let cfg;
    try {
      cfg = config.trim() ? JSON.parse(config) : {};
    } catch (e) {
      throw new ConfigError(`the configuration is not JSON: ${e.message}`);
    }
    if (cfg === null || typeof cfg !== "object" || Array.isArray(cfg)) {
      throw new ConfigError("the configuration must be a JSON object");
    }
    for (const key of Object.keys(cfg)) {
      if (!KNOWN.includes(key)) {
        throw new ConfigError(`unknown key "${key}" (known: ${JSON.stringify(KNOWN)})`);
      }
    }
    const number = (key, fallback) => {
      const v = key in cfg ? cfg[key] : fallback;
      if (v === null) return null;
      if (typeof v !== "number") throw new ConfigError(`${key} must be a number, got ${JSON.stringify(v)}`);
      return f(v);
    };
    this.pGray = number("p_gray", 0.2);
    this.pSolarize = number("p_solarize", 0.2);
    this.threshold = number("threshold", null);
    for (const [key, p] of [["p_gray", this.pGray], ["p_solarize", this.pSolarize]]) {
      if (!(p >= 0 && p <= 1)) throw new ConfigError(`${key} must be in [0, 1], got ${p}`);
    }
  }

  /** The element's two draws: [grayscale?, solarize?]. Both always happen. */
  decide(seed) {
    const rng = new Rng(seed);
    const gray = rng.f32() < this.pGray;
    const solarize = rng.f32() < this.pSolarize;
    return [gray, solarize];
  }

  /** The number of channels of an image of `shape`; an error if grayscale can't apply. */
  channels(shape, gray) {
    const c = shape.length ? Number(shape[shape.length - 1]) : 0;
    if (gray && c !== 1 && c !== 3) {
      throw new InputError(`grayscale needs 1 or 3 channels, \`image\` has shape [${shape.join(", ")}]`);
    }
    return c;
  }

  /** In place on a Uint8Array. */
  applyU8(v, channels, gray, solarize) {
    if (gray && channels === 3) {
      const [t0, t1, t2] = TABLES;
      for (let i = 0; i + 3 <= v.length; i += 3) {
        const l = f(f(t0[v[i]] + t1[v[i + 1]]) + t2[v[i + 2]]);
        // f32 round (half away from zero) of a non-negative value, then clamp.
        const g = Math.min(Math.floor(l + 0.5), 255);
        v[i] = v[i + 1] = v[i + 2] = g;
      }
    }
    if (solarize) {
      const t = this.threshold ?? 128;
      const table = Uint8Array.from({ length: 256 }, (_, x) => (x >= t ? 255 - x : x));
      for (let i = 0; i < v.length; i++) v[i] = table[v[i]];
    }
    return v;
  }

  /** In place on a Float32Array. */
  applyF32(v, channels, gray, solarize) {
    if (gray && channels === 3) {
      const [w0, w1, w2] = W;
      for (let i = 0; i + 3 <= v.length; i += 3) {
        const l = f(f(f(w0 * v[i]) + f(w1 * v[i + 1])) + f(w2 * v[i + 2]));
        v[i] = v[i + 1] = v[i + 2] = l;
      }
    }
    if (solarize) {
      const t = this.threshold ?? 0.5;
      for (let i = 0; i < v.length; i++) if (v[i] >= t) v[i] = 1 - v[i];
    }
    return v;
  }
}
