"""Tests of the transform itself, natively: `python -m unittest` in this directory."""

import unittest

from gray_solarize import ConfigError, GraySolarize, InputError, Rng


class GraySolarizeTest(unittest.TestCase):
    def test_the_rng_is_the_sdks_splitmix64(self):
        # sluice_sdk::Rng::new(0).next_u64(), SplitMix64's first output for state 0.
        self.assertEqual(Rng(0).next_u64(), 0xE220A8397B1DCDAF)

    def test_grayscale_then_solarize_by_hand(self):
        p = GraySolarize('{"p_gray": 1, "p_solarize": 1}')
        out = p.apply_u8(bytes([255, 0, 0, 10, 20, 30]), 3, True, True)
        # Red: luma 0.2989 * 255 = 76.2 -> 76, below 128: kept. Then 18.
        self.assertEqual(list(out), [76, 76, 76, 18, 18, 18])
        out = p.apply_u8(bytes([200, 200, 200]), 3, False, True)
        self.assertEqual(list(out), [55, 55, 55])

    def test_bad_configs_and_inputs_are_errors(self):
        with self.assertRaises(ConfigError):
            GraySolarize('{"p_gray": 2}')
        with self.assertRaises(ConfigError):
            GraySolarize('{"q": 1}')
        with self.assertRaises(InputError):
            GraySolarize("{}").check([1, 1, 2], True)


if __name__ == "__main__":
    unittest.main()
