// {{name}}: a Sluice plugin in JavaScript (the `map-transform` world of wit/sluice.wit),
// built by componentize-js: `info`, and the `map-element` interface's resource `instance`.
// Errors are thrown as the WIT `error` variant ({ tag, val }).
//
// With probability `p` (default 1) every value of the u8 `image` at or above `threshold`
// (default 128) becomes 255 - x. Randomness comes only from the seed of each element.
import { ConfigError, parseConfig, solarize, uniform } from "./transform.js";

const image = { name: "image", dtype: undefined, rank: 3 };

export function info() {
  return {
    name: "{{name}}",
    version: "0.1.0",
    kind: "map",
    description: "solarizes `image` (u8) with probability p",
    inputs: [image],
    outputs: [image],
  };
}

class Instance {
  constructor(config) {
    this.config = config;
  }

  static create(config) {
    try {
      return new Instance(parseConfig(config));
    } catch (e) {
      if (e instanceof ConfigError) throw { tag: "invalid-config", val: e.message };
      throw { tag: "plugin-error", val: String(e) };
    }
  }

  map(element, seed) {
    if (uniform(seed) >= this.config.p) return []; // the element unchanged
    const tensor = element.find((t) => t.name === "image");
    if (!tensor) throw { tag: "invalid-input", val: "no `image` feature" };
    if (tensor.data.tag !== "u8") throw { tag: "invalid-input", val: "`image` must be u8" };
    const values = solarize(tensor.data.val, this.config.threshold);
    return [{ name: "image", shape: tensor.shape, data: { tag: "u8", val: values } }];
  }
}

export const mapElement = { Instance };
