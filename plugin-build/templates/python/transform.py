"""{{name}}: the transform itself, plain Python (tested natively by test_transform.py)."""

import json

MASK = (1 << 64) - 1


def uniform(seed: int) -> float:
    """SplitMix64, the generator of Sluice's SDKs: uniform in [0, 1) from 24 random bits."""
    z = (seed + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return ((z ^ (z >> 31)) >> 40) / (1 << 24)


def solarize_table(threshold: int) -> bytes:
    """The byte map of the transform: values at or above `threshold` inverted."""
    return bytes(255 - x if x >= threshold else x for x in range(256))


class ConfigError(ValueError):
    """The configuration is invalid."""


def parse_config(config: str):
    """(threshold, p) from the JSON configuration."""
    try:
        cfg = json.loads(config) if config.strip() else {}
    except ValueError as e:
        raise ConfigError(f"not JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise ConfigError("the configuration must be a JSON object")
    threshold, p = 128, 1.0
    for key, v in cfg.items():
        if key == "threshold":
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 255:
                raise ConfigError("threshold must be an integer from 0 to 255")
            threshold = v
        elif key == "p":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ConfigError("p must be in [0, 1]")
            p = float(v)
        else:
            raise ConfigError(f'unknown key "{key}" (known: threshold, p)')
    return threshold, p
