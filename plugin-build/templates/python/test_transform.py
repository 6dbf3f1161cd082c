"""Tests of the transform, natively: `python -m unittest` (or pytest) in this directory."""

import unittest

from transform import ConfigError, parse_config, solarize_table, uniform


class TransformTest(unittest.TestCase):
    def test_solarizes_at_and_above_the_threshold(self):
        self.assertEqual(bytes([0, 127, 128, 255]).translate(solarize_table(128)), bytes([0, 127, 127, 0]))

    def test_the_generator_is_the_sdks_splitmix64(self):
        self.assertEqual(uniform(0), (0xE220A8397B1DCDAF >> 40) / (1 << 24))

    def test_configurations(self):
        self.assertEqual(parse_config("{}"), (128, 1.0))
        self.assertEqual(parse_config('{"threshold": 10, "p": 0.5}'), (10, 0.5))
        with self.assertRaises(ConfigError):
            parse_config('{"threshold": 300}')
        with self.assertRaises(ConfigError):
            parse_config('{"q": 1}')


if __name__ == "__main__":
    unittest.main()
