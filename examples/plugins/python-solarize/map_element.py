"""The `map-element` interface: one instance per worker, `map` per element."""

from typing import List

from componentize_py_types import Err
from wit_world.exports import map_element
from wit_world.imports import types

from gray_solarize import ConfigError, GraySolarize, InputError


class Instance(map_element.Instance):
    def __init__(self, plugin: GraySolarize) -> None:
        self.plugin = plugin

    @classmethod
    def create(cls, config: str) -> "Instance":
        try:
            return cls(GraySolarize(config))
        except ConfigError as e:
            raise Err(types.Error_InvalidConfig(str(e)))

    def map(self, element: List[types.Tensor], seed: int) -> List[types.Tensor]:
        image = next((t for t in element if t.name == "image"), None)
        if image is None:
            raise Err(types.Error_InvalidInput("no `image` feature"))
        p = self.plugin
        gray, solarize = p.decide(seed)
        try:
            channels = p.check(image.shape, gray)
        except InputError as e:
            raise Err(types.Error_InvalidInput(str(e)))
        data = image.data
        if isinstance(data, types.TensorData_U8):
            out = types.TensorData_U8(p.apply_u8(data.value, channels, gray, solarize))
        elif isinstance(data, types.TensorData_F32):
            out = types.TensorData_F32(p.apply_f32(data.value, channels, gray, solarize))
        else:
            kind = type(data).__name__.split("_")[-1].lower()
            raise Err(types.Error_InvalidInput(f"`image` must be u8 or f32, got {kind}"))
        if not (gray or solarize):
            return []
        return [types.Tensor(name="image", shape=image.shape, data=out)]
