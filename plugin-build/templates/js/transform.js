// {{name}}: the transform itself, plain JavaScript (tested natively by transform.test.js).

const MASK = (1n << 64n) - 1n;

/** SplitMix64, the generator of Sluice's SDKs: uniform in [0, 1) from 24 random bits. */
export function uniform(seed) {
  let z = (BigInt(seed) + 0x9e3779b97f4a7c15n) & MASK;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return Number((z ^ (z >> 31n)) >> 40n) / 16777216;
}

/** In place: values at or above `threshold` inverted. */
export function solarize(values, threshold) {
  for (let i = 0; i < values.length; i++) if (values[i] >= threshold) values[i] = 255 - values[i];
  return values;
}

export class ConfigError extends Error {}

/** { threshold, p } from the JSON configuration. */
export function parseConfig(config) {
  let cfg;
  try {
    cfg = config.trim() ? JSON.parse(config) : {};
  } catch (e) {
    throw new ConfigError(`not JSON: ${e.message}`);
  }
  if (cfg === null || typeof cfg !== "object" || Array.isArray(cfg)) {
    throw new ConfigError("the configuration must be a JSON object");
  }
  const out = { threshold: 128, p: 1 };
  for (const [key, v] of Object.entries(cfg)) {
    if (key === "threshold") {
      if (!Number.isInteger(v) || v < 0 || v > 255) throw new ConfigError("threshold must be an integer from 0 to 255");
      out.threshold = v;
    } else if (key === "p") {
      if (typeof v !== "number" || !(v >= 0 && v <= 1)) throw new ConfigError("p must be in [0, 1]");
      out.p = v;
    } else {
      throw new ConfigError(`unknown key "${key}" (known: threshold, p)`);
    }
  }
  return out;
}
