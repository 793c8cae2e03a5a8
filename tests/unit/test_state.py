import pickle

import numpy as np
import pytest

from trl_kgps import KGPSConfig, KGPSSelector


def busy_selector(seed=0, N=400):
    rng = np.random.default_rng(seed)
    selector = KGPSSelector(N, KGPSConfig(), seed=seed)
    selector.initialize(np.arange(N), rng.binomial(8, rng.uniform(size=N)), np.full(N, 8))
    for _ in range(10):
        batch = selector.select(16)
        selector.predict(rng.uniform(0, 1))
        selector.update(batch, rng.binomial(8, 0.5, 16), np.full(16, 8))
    return selector


def continue_run(selector, rounds=15, seed=99):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        batch = selector.select(16)
        out.append(batch)
        selector.predict(rng.uniform(0, 1))
        selector.update(batch, rng.binomial(8, 0.5, 16), np.full(16, 8))
    return np.concatenate(out)


def test_round_trip_continues_bit_for_bit():
    original = busy_selector()
    state = pickle.loads(pickle.dumps(original.state_dict()))
    restored = KGPSSelector(original.num_prompts, KGPSConfig(), seed=12345)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.mean, original.mean)
    np.testing.assert_array_equal(restored.variance, original.variance)
    np.testing.assert_array_equal(continue_run(restored), continue_run(original))
    np.testing.assert_array_equal(restored.mean, original.mean)
    np.testing.assert_array_equal(restored.variance, original.variance)


def test_state_dict_is_a_snapshot_not_a_view():
    selector = busy_selector()
    state = selector.state_dict()
    state["mean"][:] = 99.0
    state["variance_base"][:] = 99.0
    assert selector.mean.max() < 99.0 and selector.variance.max() < 99.0


def test_mean_is_read_only():
    selector = KGPSSelector(3)
    with pytest.raises(ValueError):
        selector.mean[0] = 1.0
    selector.variance[0] = 5.0  # a fresh array: writing to it changes nothing
    assert selector.variance[0] == selector.config.initial_variance + selector.config.shared_variance


def test_shapes_and_dtypes():
    selector = busy_selector(N=50)
    assert selector.mean.shape == selector.variance.shape == selector.scores().shape == (50,)
    assert selector.predicted_success().shape == (50,)
    assert selector.predicted_success([3, 4]).shape == (2,)
    assert selector.select(7).dtype == np.int64
