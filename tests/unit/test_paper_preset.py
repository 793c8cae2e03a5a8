"""`KGPSConfig.paper()` is the selector trl-kgps shipped before its default changed, bit for bit."""

from pathlib import Path

import numpy as np
from paper_trajectory import paper_trajectory

from trl_kgps import KGPSConfig, KGPSSelector


RECORDED = Path(__file__).parents[1] / "data" / "paper_trajectory.npz"


def test_the_paper_preset_replays_the_recorded_run_bit_for_bit():
    replay = paper_trajectory(KGPSSelector, KGPSConfig.paper())
    with np.load(RECORDED) as recorded:
        assert set(recorded.files) == set(replay)
        for name in recorded.files:
            np.testing.assert_array_equal(replay[name], recorded[name], err_msg=name)


def test_the_default_is_not_the_paper():
    replay = paper_trajectory(KGPSSelector, KGPSConfig())
    with np.load(RECORDED) as recorded:
        assert not np.array_equal(replay["selections"], recorded["selections"])


def test_the_paper_preset_keeps_gamma_fixed_which_the_recorded_run_tells_apart():
    # The default calibrates gamma; the paper's preset does not. The recorded run would show it: with the calibration,
    # its selections differ after a few rounds.
    default = KGPSConfig().resolved(has_metadata=True)
    assert KGPSConfig.paper().process_noise_adaptation == 0.0 < default.process_noise_adaptation
    replay = paper_trajectory(KGPSSelector, KGPSConfig.paper(process_noise_adaptation=0.05))
    with np.load(RECORDED) as recorded:
        assert not np.array_equal(replay["selections"], recorded["selections"])
