"""The worker's levelling: its peak limiter and the running minimum under it. These need numpy,
which the worker's own environment has (scripts/test runs them with the Piper venv's python)."""

import importlib.util
import pathlib
import unittest

try:
    import numpy as np
except ImportError:  # pragma: no cover - the system python3 without numpy
    np = None

HERE = pathlib.Path(__file__).resolve().parent
_specification = importlib.util.spec_from_file_location(
    "speakd_piper_worker", HERE.parent / "speakd-piper-worker.py")
worker = importlib.util.module_from_spec(_specification)
_specification.loader.exec_module(worker)


@unittest.skipIf(np is None, "numpy is not installed for this python3 (the Piper venv has it)")
class LevellingTests(unittest.TestCase):
    def test_sliding_minimum_is_the_minimum_of_each_centred_window(self):
        generator = np.random.default_rng(7)
        for count, width in [(1, 5), (7, 5), (221, 221), (1000, 221), (5000, 9)]:
            values = generator.random(count)
            half = width // 2
            expected = [values[max(0, index - half) : index + half + 1].min() for index in range(count)]
            np.testing.assert_array_equal(worker.sliding_minimum(values, width), expected)

    def test_peaks_over_the_ceiling_are_brought_to_it_and_quiet_audio_is_untouched(self):
        generator = np.random.default_rng(11)
        audio = (generator.standard_normal(22_050) * 0.05).astype(np.float32)
        quiet = worker.peak_limited(audio * 0.1, 0.5, 221)
        np.testing.assert_array_equal(quiet, audio * 0.1)
        audio[5_000] = 0.9
        audio[12_000:12_010] = -0.8
        limited = worker.peak_limited(audio, 0.3, 221)
        self.assertEqual(limited.dtype, np.float32)
        self.assertLessEqual(float(np.abs(limited).max()), 0.3 + 1e-6)
        # The gain falls only near the peaks: far from them every sample is as it was.
        far = np.r_[0:4_000, 6_000:11_000, 13_000:22_050]
        untouched = np.abs(audio[far]) <= 0.3
        np.testing.assert_array_equal(limited[far][untouched], audio[far][untouched])
        # And it changes gradually: no sample's gain jumps by more than the window allows.
        gain = limited[4_000:6_000] / audio[4_000:6_000]
        self.assertLess(float(np.abs(np.diff(gain)).max()), 1 / 221 + 1e-3)


if __name__ == "__main__":
    unittest.main()
