"""{{name}}: a Sluice plugin in Python (the `map-transform` world of wit/sluice.wit), built
by componentize-py. This module holds the world's function (`info`); map_element.py the
instances; transform.py the transform itself.

With probability `p` (default 1) every value of the u8 `image` at or above `threshold`
(default 128) becomes 255 - x. Randomness comes only from the seed of each element.
"""

import wit_world
from wit_world.imports import types


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        image = types.Feature(name="image", dtype=None, rank=3)
        return types.PluginInfo(
            name="{{name}}",
            version="0.1.0",
            kind=types.Kind.MAP,
            description="solarizes `image` (u8) with probability p",
            inputs=[image],
            outputs=[image],
        )
