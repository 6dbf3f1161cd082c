// `gray_solarize` as a component of the `map-transform` world (sdk/wit/sluice.wit), built
// by componentize-js: `info`, and the `map-element` interface's resource `instance`.
// Errors are thrown as the WIT `error` variant ({ tag, val }).
import { ConfigError, GraySolarize, InputError } from "./gray_solarize.js";

const image = { name: "image", dtype: undefined, rank: 3 };

export function info() {
  return {
    name: "gray_solarize",
    version: "0.1.0",
    kind: "map",
    description: "random grayscale and solarize of `image` ([H, W, C], u8 or f32)",
    inputs: [image],
    outputs: [image],
  };
}

class Instance {
  constructor(plugin) {
    this.plugin = plugin;
  }

  static create(config) {
    try {
      return new Instance(new GraySolarize(config));
    } catch (e) {
      if (e instanceof ConfigError) throw { tag: "invalid-config", val: e.message };
      throw { tag: "plugin-error", val: String(e) };
    }
  }

  map(element, seed) {
    const tensor = element.find((t) => t.name === "image");
    if (!tensor) throw { tag: "invalid-input", val: "no `image` feature" };
    const p = this.plugin;
    const [gray, solarize] = p.decide(seed);
    let channels;
    try {
      channels = p.channels(tensor.shape, gray);
    } catch (e) {
      if (e instanceof InputError) throw { tag: "invalid-input", val: e.message };
      throw e;
    }
    const { tag, val } = tensor.data;
    let data;
    if (tag === "u8") data = { tag, val: p.applyU8(val, channels, gray, solarize) };
    else if (tag === "f32") data = { tag, val: p.applyF32(val, channels, gray, solarize) };
    else throw { tag: "invalid-input", val: `\`image\` must be u8 or f32, got ${tag}` };
    if (!gray && !solarize) return [];
    return [{ name: "image", shape: tensor.shape, data }];
  }
}

export const mapElement = { Instance };
