"""The component's world (`map-transform` of sdk/wit/sluice.wit): its metadata."""

import wit_world
from wit_world.imports import types


class WitWorld(wit_world.WitWorld):
    def info(self) -> types.PluginInfo:
        image = types.Feature(name="image", dtype=None, rank=3)
        return types.PluginInfo(
            name="gray_solarize",
            version="0.1.0",
            kind=types.Kind.MAP,
            description="random grayscale and solarize of `image` ([H, W, C], u8 or f32)",
            inputs=[image],
            outputs=[image],
        )
