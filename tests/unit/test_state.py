import dataclasses
import pickle

import numpy as np
import pytest

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector, experimental


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


def _as_version_3(selector) -> dict:
    """The state trl-kgps 0.3 wrote for `selector`: version 3, every selector's state holding the pass, gamma's
    calibration and the group size last seen, and naming its config class."""
    extra = {"pass_order": np.empty(0, np.int64), "pass_position": 0, "gamma_scale": 1.0, "group_size_seen": 8}
    return {
        **extra,
        **selector.state_dict(),
        "version": 3,
        "config": dataclasses.asdict(experimental(selector.config)),
        "config_class": type(selector.config).__name__,
    }


def test_a_version_3_state_loads_into_the_selector_of_its_config(tmp_path):
    from trl_kgps import load_selector
    from trl_kgps.engine import state_file

    plain = busy_selector()
    restored = KGPSSelector.from_state_dict(_as_version_3(plain))
    np.testing.assert_array_equal(continue_run(restored), continue_run(busy_selector()))
    # a variant's: an ExperimentalSelector, recorded by 0.3 as a KGPSSelector of an ExperimentalConfig
    variant = ExperimentalSelector(400, ExperimentalConfig(candidate_pass=True, candidates=4.0), seed=2)
    continue_run(variant, rounds=3)
    state = {**_as_version_3(variant), **variant.state_dict(), "version": 3, "config_class": "ExperimentalConfig"}
    with pytest.raises(ValueError, match="experimental variant.*load it with.*ExperimentalSelector"):
        KGPSSelector.from_state_dict(state)
    arrays, meta = state_file.pack_selector(state)
    state_file.save(str(tmp_path / "kgps_state.npz"), arrays, {"selector": meta, "selector_class": "KGPSSelector"})
    loaded = load_selector(tmp_path)
    assert type(loaded) is ExperimentalSelector and loaded.config == variant.config
    np.testing.assert_array_equal(continue_run(loaded), continue_run(variant))


def test_a_kgps_selector_refuses_an_experimental_config_naming_the_class_that_reads_it():
    with pytest.raises(TypeError, match=r"fields \['candidate_pass'.*build .*ExperimentalSelector"):
        KGPSSelector(10, ExperimentalConfig())
    # and the state of a KGPSSelector holds nothing of the variants (gamma's calibration is the default's since
    # version 5)
    assert not {"pass_order", "group_size_seen", "config_class"} & KGPSSelector(10).state_dict().keys()
