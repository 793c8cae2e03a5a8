"""Every bad input raises a ValueError that names the value, before any state changes."""

import numpy as np
import pytest

from trl_kgps import KGPSConfig, KGPSSelector


N = 20


@pytest.fixture
def selector():
    selector = KGPSSelector(N, seed=5)
    rng = np.random.default_rng(0)
    selector.initialize(np.arange(N), rng.binomial(8, 0.5, N), np.full(N, 8))
    selector.select(4)
    selector.predict(0.3)
    return selector


def snapshot(selector):
    state = selector.state_dict()
    return state["mean"].copy(), state["variance_base"].copy(), state["variance_offset"], state["rng_state"]


def assert_unchanged(before, selector):
    after = snapshot(selector)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    assert before[2:] == after[2:]


@pytest.mark.parametrize("num_prompts", [0, -3, 2.5, True, "10", None])
def test_num_prompts_must_be_a_positive_integer(num_prompts):
    with pytest.raises(ValueError, match="num_prompts must be a positive integer"):
        KGPSSelector(num_prompts)


def test_config_must_be_a_kgps_config():
    with pytest.raises(TypeError, match="KGPSConfig"):
        KGPSSelector(3, config={"gamma": 0.1})


BAD_CALLS = {
    "batch_size zero": (lambda s: s.select(0), "batch_size must lie in \\[1, 20\\].*got 0"),
    "batch_size negative": (lambda s: s.select(-2), "got -2"),
    "batch_size above pool": (lambda s: s.select(N + 1), "got 21"),
    "batch_size above selectable": (lambda s: s.select(N - 2, exclude=[0, 1, 2]), "\\[1, 17\\].*got 18"),
    "batch_size float": (lambda s: s.select(2.5), "positive integer, got 2.5"),
    "batch_size bool": (lambda s: s.select(True), "positive integer, got True"),
    "exclude out of range": (lambda s: s.select(2, exclude=[N]), "exclude must lie in \\[0, 20\\).*got 20"),
    "exclude float": (lambda s: s.select(2, exclude=[1.5]), "exclude must hold integer"),
    "update index negative": (lambda s: s.update([-1], [1], [2]), "indices must lie in .*got -1"),
    "update index too large": (lambda s: s.update([0, N], [1, 1], [2, 2]), "got 20 at position 1"),
    "update index float": (lambda s: s.update([0.0], [1], [2]), "indices must hold integer .*float64"),
    "update index 2-D": (lambda s: s.update([[0]], [1], [2]), "1-D sequence"),
    "update successes above trials": (
        lambda s: s.update([0, 3], [1, 5], [2, 4]),
        "successes \\(5\\) exceed trials \\(4\\) for prompt 3",
    ),
    "update negative successes": (lambda s: s.update([0], [-1], [2]), "successes must be whole, non-negative.*-1"),
    "update negative trials": (lambda s: s.update([0], [0], [-2]), "trials must be whole, non-negative.*-2"),
    "update NaN successes": (lambda s: s.update([0], [np.nan], [2]), "successes must be .*nan"),
    "update NaN trials": (lambda s: s.update([0], [1], [np.nan]), "trials must be .*nan"),
    "update fractional count": (lambda s: s.update([0], [0.5], [2]), "whole.*0.5"),
    "update string counts": (lambda s: s.update([0], ["1"], [2]), "successes must hold numbers"),
    "update short successes": (
        lambda s: s.update([0, 1], [1], [2, 2]),
        "one count per index \\(2\\), got shape \\(1,\\)",
    ),
    "update long trials": (lambda s: s.update([0], [1], [2, 2]), "trials must be .*shape \\(2,\\)"),
    "update bad entry after good ones": (
        lambda s: s.update([0, 1, 2], [1, 1, 9], [2, 2, 2]),
        "prompt 2 at position 2",
    ),
    "initialize index out of range": (lambda s: s.initialize([N + 5], [1], [2]), "got 25"),
    "initialize successes above trials": (lambda s: s.initialize([1], [3], [2]), "exceed trials"),
    "initialize NaN trials": (lambda s: s.initialize([1], [1], [np.nan]), "nan"),
    "predict NaN": (lambda s: s.predict(float("nan")), "delta_norm must be finite and >= 0.*nan"),
    "predict negative": (lambda s: s.predict(-0.1), "got -0.1"),
    "predict infinite": (lambda s: s.predict(float("inf")), "got inf"),
    "predict one bad step": (lambda s: s.predict([0.1, np.nan]), "nan"),
    "predict 2-D": (lambda s: s.predict([[0.1]]), "shape \\(1, 1\\)"),
    "predict string": (lambda s: s.predict("big"), "delta_norm must be a number"),
    # the gamma in use (0.1, as the warmup calibrated it) times a finite norm: Q = 1e12 * 1.0001, past the largest
    # logit variance KGPS adds
    "predict past the largest variance": (
        lambda s: s.predict(1.0001e12 / s.gamma),
        "Q = 1.0001e\\+12 .* above 1e\\+12",
    ),
    "predicted_success bad index": (lambda s: s.predicted_success([N]), "got 20"),
}


@pytest.mark.parametrize("call, message", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_call_raises_before_any_change(selector, call, message):
    before = snapshot(selector)
    with pytest.raises(ValueError, match=message):
        call(selector)
    assert_unchanged(before, selector)


def _replace(**changes):
    def corrupt(state):
        state.update(changes)
        return state

    return corrupt


def _drop(key):
    def corrupt(state):
        del state[key]
        return state

    return corrupt


def _set_entry(key, position, value):
    def corrupt(state):
        state[key] = state[key].copy()
        state[key][position] = value
        return state

    return corrupt


BAD_STATES = {
    "other size": (
        _replace(num_prompts=N + 1, mean=np.zeros(N + 1, np.float32)),
        "for 21 prompts, but this selector has 20",
    ),
    "other version": (_replace(version=99), "version 99"),
    "missing key": (_drop("rng_state"), "missing \\['rng_state'\\]"),
    "array of other length": (
        _replace(variance_base=np.ones(N - 1, np.float32)),
        "shape \\(19,\\), but this selector has 20",
    ),
    "NaN mean": (_set_entry("mean", 3, np.nan), "finite floats"),
    "negative variance": (_set_entry("variance_base", 0, -5.0), "negative variances"),
    "offset out of range": (_replace(variance_offset=3.0), "variance_offset"),
    "offset not a number": (_replace(variance_offset="0.1"), "must be a number"),
    "bad generator state": (_replace(rng_state={"bit_generator": "MT19937"}), "PCG64"),
    "not a dict": (lambda state: list(state.items()), "must be a dict"),
}


@pytest.mark.parametrize("corrupt, message", BAD_STATES.values(), ids=BAD_STATES.keys())
def test_bad_state_dict_raises_before_any_change(selector, corrupt, message):
    before = snapshot(selector)
    donor = KGPSSelector(N, seed=9)
    with pytest.raises(ValueError, match=message):
        selector.load_state_dict(corrupt(donor.state_dict()))
    assert_unchanged(before, selector)


def test_counts_may_come_as_floats_tensors_or_booleans(selector):
    torch = pytest.importorskip("torch")
    reference = KGPSSelector(N, KGPSConfig())
    reference.load_state_dict(selector.state_dict())
    selector.update(torch.tensor([3, 4]), torch.tensor([1.0, 0.0]), np.array([2.0, 2.0]))
    reference.update([3, 4], [True, False], [2, 2])
    np.testing.assert_array_equal(selector.mean, reference.mean)
    selector.predict(torch.tensor(0.5))
