"""
How `trl_kgps_0.2_variants/` was made: run with trl-kgps 0.2 (commit d9824bc) importable, not today's trl-kgps,

    git archive d9824bc trl_kgps | tar -x -C /tmp/kgps02
    PYTHONPATH=/tmp/kgps02 python tests/data/trl_kgps_0.2_variants/make_with_0_2.py tests/data/trl_kgps_0.2_variants

For each variant of KGPS that 0.2's `KGPSConfig` held (`ExperimentalConfig`'s fields today), it writes the
`kgps_state.npz` 0.2 saved after 5 rounds (KGPS state version 2, over 40 prompts in batches of 4 with a fresh sampler),
and `continued.npz`: the 6 rounds 0.2 chose next and its beliefs after them. `tests/unit/test_state.py` replays them
with the same `drive`.
"""

import os
import sys

import numpy as np

from trl_kgps import KGPSConfig, KGPSSelector, _state_file
from trl_kgps.sampler import KGPSRepeatSampler


VARIANTS = {
    "mixed_pass": KGPSConfig(objective="mixed", candidate_pass=True, candidates=4.0),
    "thompson": KGPSConfig(selection="thompson", candidates=4.0),
    "point_drift": KGPSConfig(utility="point", shared_drift=0.1, process_noise_power=2.0, group_size=6),
}


def drive(selector, rounds: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(rounds):
        batch = selector.select(4)
        batches.append(batch)
        selector.predict(rng.uniform(0.1, 1.0))
        selector.update(batch, rng.binomial(8, 0.4, 4), np.full(4, 8))
    return np.stack(batches)


for name, config in VARIANTS.items():
    selector = KGPSSelector(40, config, seed=3)
    drive(selector, 5, seed=1)
    sampler = KGPSRepeatSampler(range(40), mini_repeat_count=8, batch_size=4, selector=selector, warmup_epochs=0)
    directory = os.path.join(sys.argv[1], name)
    _state_file.write(directory, selector, sampler.state_dict())
    batches = drive(selector, 6, seed=2)
    np.savez(os.path.join(directory, "continued.npz"), batches=batches, mean=selector.mean, variance=selector.variance)
