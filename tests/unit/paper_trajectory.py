"""
A seeded run of the paper's selector that `tests/data/paper_trajectory.npz` recorded with trl-kgps 0.1 (commit
a9294a9, before the default changed): `test_paper_preset.py` replays it with `KGPSConfig.paper()`.
"""

import numpy as np


def paper_trajectory(selector_class, config) -> dict[str, np.ndarray]:
    """Warmup, then 60 rounds with a lag of one batch, float norms and mixed outcomes; every selection and the end state."""
    N, B, k = 3000, 48, 8
    rng = np.random.default_rng(2024)
    truth = rng.normal(0.0, 2.0, N)
    selector = selector_class(N, config, seed=7)
    for start in range(0, N, 500):
        batch = np.arange(start, start + 500)
        selector.initialize(batch, rng.binomial(k, 1 / (1 + np.exp(-truth[batch]))), np.full(batch.size, k))
    selections, pending = [], None
    for _ in range(60):
        batch = selector.select(B, exclude=pending)
        selections.append(batch)
        if pending is not None:
            selector.predict(rng.uniform(0.0, 3.0, size=2))
            selector.update(pending, rng.binomial(k, 1 / (1 + np.exp(-truth[pending]))), np.full(B, k))
        truth += rng.normal(0.0, 0.1, N)
        pending = batch
    state = selector.state_dict()
    return {
        "selections": np.stack(selections),
        "mean": state["mean"],
        "variance_base": state["variance_base"],
        "variance_offset": np.float64(state["variance_offset"]),
        "scores": selector.scores(),
    }
