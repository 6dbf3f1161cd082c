"""`gray_solarize` in Python: the same transform as the Rust example
(examples/plugins/solarize), the same bits for the same seed and configuration.

Per element, with probability `p_gray` the `image` ([H, W, 3], u8 or f32) becomes its luma
(weights 0.2989, 0.5870, 0.1140, in f32 arithmetic; u8 luma rounded), repeated in each
channel; then with probability `p_solarize` every value at or above `threshold` is
inverted (`255 - x` for u8, `1 - x` for f32; default threshold 128 or 0.5).

This module is plain Python (no bindings): the component's glue is in app.py and
map_element.py, and test_gray_solarize.py tests it with `python -m unittest`.
"""

import json
import struct
from array import array
from operator import add

MASK = (1 << 64) - 1


class Rng:
    """The SDK's per-element generator (SplitMix64), as `sluice_sdk::Rng`."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK

    def next_u64(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def f32(self) -> float:
        """Uniform in [0, 1): 24 random bits."""
        return (self.next_u64() >> 40) * (1.0 / (1 << 24))


def f32(x: float) -> float:
    """`x` rounded to the nearest f32 (Python floats are f64)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


W = (f32(0.2989), f32(0.5870), f32(0.1140))
# W[c] * x for every u8 value x, rounded to f32 as an f32 product is.
_TABLES = [array("f", [w * x for x in range(256)]) for w in W]


class ConfigError(ValueError):
    """The configuration is invalid."""


class InputError(ValueError):
    """The element breaks the plugin's contract."""


KNOWN = ("p_gray", "p_solarize", "threshold")


class GraySolarize:
    """One instance, made from the JSON configuration."""

    def __init__(self, config: str) -> None:
        try:
            cfg = json.loads(config) if config.strip() else {}
        except ValueError as e:
            raise ConfigError(f"the configuration is not JSON: {e}") from None
        if not isinstance(cfg, dict):
            raise ConfigError("the configuration must be a JSON object")
        for key in cfg:
            if key not in KNOWN:
                raise ConfigError(f"unknown key {key!r} (known: {list(KNOWN)})")

        def number(key, default):
            v = cfg.get(key, default)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ConfigError(f"{key} must be a number, got {v!r}")
            return f32(float(v))

        self.p_gray = number("p_gray", 0.2)
        self.p_solarize = number("p_solarize", 0.2)
        self.threshold = number("threshold", None)
        for key in ("p_gray", "p_solarize"):
            p = getattr(self, key)
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"{key} must be in [0, 1], got {p}")

    def decide(self, seed: int):
        """The element's two draws: (grayscale?, solarize?). Both always happen."""
        rng = Rng(seed)
        gray = rng.f32() < self.p_gray
        solarize = rng.f32() < self.p_solarize
        return gray, solarize

    def apply_u8(self, data: bytes, channels: int, gray: bool, solarize: bool) -> bytes:
        if gray and channels == 3:
            r, g, b = data[0::3], data[1::3], data[2::3]
            t0, t1, t2 = _TABLES
            s = array("f", map(add, map(t0.__getitem__, r), map(t1.__getitem__, g)))
            s = array("f", map(add, s, map(t2.__getitem__, b)))
            # f32 round (half away from zero) of a non-negative value, then clamp.
            luma = bytes([min(int(v + 0.5), 255) for v in s])
            out = bytearray(len(data))
            out[0::3] = luma
            out[1::3] = luma
            out[2::3] = luma
            data = bytes(out)
        if solarize:
            t = 128.0 if self.threshold is None else self.threshold
            table = bytes(255 - x if x >= t else x for x in range(256))
            data = data.translate(table)
        return data

    def apply_f32(self, data, channels: int, gray: bool, solarize: bool):
        v = array("f", data)
        if gray and channels == 3:
            w0, w1, w2 = W
            p0 = array("f", [w0 * x for x in v[0::3]])
            p1 = array("f", [w1 * x for x in v[1::3]])
            p2 = array("f", [w2 * x for x in v[2::3]])
            luma = array("f", map(add, array("f", map(add, p0, p1)), p2))
            v[0::3] = luma
            v[1::3] = luma
            v[2::3] = luma
        if solarize:
            t = 0.5 if self.threshold is None else self.threshold
            v = array("f", [1.0 - x if x >= t else x for x in v])
        return v.tolist()

    def check(self, shape, gray: bool) -> int:
        channels = shape[-1] if shape else 0
        if gray and channels not in (1, 3):
            raise InputError(
                f"grayscale needs 1 or 3 channels, `image` has shape {list(shape)}"
            )
        return channels
