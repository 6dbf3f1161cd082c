"""The `map-element` interface: one instance per worker thread, `map` per element."""

from typing import List

from componentize_py_types import Err
from wit_world.exports import map_element
from wit_world.imports import types

from transform import ConfigError, parse_config, solarize_table, uniform


class Instance(map_element.Instance):
    def __init__(self, threshold: int, p: float) -> None:
        self.table = solarize_table(threshold)
        self.p = p

    @classmethod
    def create(cls, config: str) -> "Instance":
        try:
            return cls(*parse_config(config))
        except ConfigError as e:
            raise Err(types.Error_InvalidConfig(str(e)))

    def map(self, element: List[types.Tensor], seed: int) -> List[types.Tensor]:
        if uniform(seed) >= self.p:
            return []  # the element unchanged
        image = next((t for t in element if t.name == "image"), None)
        if image is None:
            raise Err(types.Error_InvalidInput("no `image` feature"))
        if not isinstance(image.data, types.TensorData_U8):
            raise Err(types.Error_InvalidInput("`image` must be u8"))
        data = types.TensorData_U8(image.data.value.translate(self.table))
        return [types.Tensor(name="image", shape=image.shape, data=data)]
