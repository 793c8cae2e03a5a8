"""The paper's baselines against references written here, and behind the selector interface."""

import numpy as np
import pytest

from trl_kgps import KGPSSelector
from trl_kgps.selectors import DPSSelector, GRESOSelector, MoPPSSelector, UniformSelector


ALL = [UniformSelector, MoPPSSelector, GRESOSelector, DPSSelector, KGPSSelector]


@pytest.mark.parametrize("cls", ALL)
def test_interface_selects_distinct_allowed_prompts_and_round_trips(cls):
    rng = np.random.default_rng(0)
    selector, twin = cls(50, seed=3), cls(50, seed=99)
    for _ in range(5):
        batch = selector.select(8, exclude=[0, 1, 2])
        assert batch.size == 8 == np.unique(batch).size and not np.isin(batch, [0, 1, 2]).any()
        selector.predict(0.1)
        selector.update(batch, rng.binomial(4, 0.5, 8), np.full(8, 4))
    twin.load_state_dict(selector.state_dict())
    for _ in range(5):
        a, b = selector.select(8), twin.select(8)
        np.testing.assert_array_equal(a, b)
        s = rng.binomial(4, 0.3, 8)
        selector.update(a, s, np.full(8, 4))
        twin.update(b, s, np.full(8, 4))
    np.testing.assert_array_equal(selector.predicted_success(), twin.predicted_success())


@pytest.mark.parametrize("cls", ALL)
def test_bad_input_is_refused_before_any_change(cls):
    selector = cls(10, seed=0)
    before = selector.predicted_success()
    for call in (
        lambda: selector.select(11),
        lambda: selector.select(0),
        lambda: selector.select(9, exclude=[0, 1]),
        lambda: selector.update([10], [1], [2]),
        lambda: selector.update([0], [3], [2]),
        lambda: selector.predict(float("nan")),
    ):
        with pytest.raises(ValueError):
            call()
    np.testing.assert_array_equal(selector.predicted_success(), before)
    with pytest.raises(ValueError, match="prompts"):
        cls(11).load_state_dict(selector.state_dict())


def test_uniform_covers_every_prompt_once_an_epoch_and_postpones_excluded_ones():
    selector = UniformSelector(12, seed=1)
    epoch = np.concatenate([selector.select(4) for _ in range(3)])
    assert sorted(epoch.tolist()) == list(range(12))
    first = selector.select(4)
    second = selector.select(4, exclude=first)
    third = selector.select(4, exclude=second)
    assert sorted(np.concatenate([first, second, third]).tolist()) == list(range(12))


def test_mopps_posterior_updates_match_the_formula():
    for decay, to_prior in ((1.0, True), (0.7, True), (0.7, False)):
        selector = MoPPSSelector(3, decay=decay, decay_to_prior=to_prior)
        alpha, beta = np.ones(3), np.ones(3)
        for s, k in ((2, 4), (4, 4), (0, 8)):
            selector.update([1], [s], [k])
            keep = (1 - decay) if to_prior else 0.0
            alpha[1] = decay * alpha[1] + keep + s
            beta[1] = decay * beta[1] + keep + (k - s)
        np.testing.assert_allclose(selector.alpha, alpha)
        np.testing.assert_allclose(selector.beta, beta)
        assert selector.predicted_success([1])[0] == pytest.approx(alpha[1] / (alpha[1] + beta[1]))


def test_mopps_keeps_the_candidates_whose_thompson_samples_are_nearest_the_target():
    selector = MoPPSSelector(40, candidate_ratio=2.0, seed=5)
    twin = np.random.Generator(np.random.PCG64(5))  # replays the selector's draws
    rates = np.linspace(0.02, 0.98, 40)
    selector.update(np.arange(40), np.round(rates * 200), np.full(40, 200))
    batch = selector.select(10, exclude=[0])
    candidates = twin.choice(np.arange(1, 40), size=20, replace=False)
    samples = twin.beta(selector.alpha[candidates], selector.beta[candidates])
    np.testing.assert_array_equal(batch, candidates[np.argsort(np.abs(samples - 0.5), kind="stable")[:10]])
    assert np.abs(selector.predicted_success(batch) - 0.5).mean() < np.abs(rates - 0.5).mean()


def test_greso_skip_probabilities_and_adaptation_match_the_rule():
    selector = GRESOSelector(4, seed=0)
    selector.update([0, 1, 2], [4, 0, 2], [4, 4, 4])  # easy, hard, mixed; prompt 3 never observed
    selector.update([0], [4], [4])  # prompt 0: two all-correct groups in a row
    # shares after the first batch: easy 1/3 > 1/12 -> p_easy 0.49; hard 1/3 > 1/6 -> p_hard 0.49
    # after the second: easy 1 -> 0.48; hard 0 < 1/6 -> 0.50
    assert (selector.p_easy, selector.p_hard) == pytest.approx((0.48, 0.50))
    np.testing.assert_allclose(selector._keep_probability(np.arange(4)), [0.48**2, 0.50, 1.0, 1.0])
    selector.p_easy = 0.05
    selector.streak[0] = 5
    assert selector._keep_probability(np.array([0]))[0] == GRESOSelector.EXPLORATION_FLOOR


def test_greso_keeps_a_prompt_at_its_rate():
    kept = 0
    for seed in range(400):
        selector = GRESOSelector(2, seed=seed)
        selector.update([0, 0], [3, 3], [3, 3])  # pooled, one all-correct group: streak 1, p_easy 0.49
        selector.update([1], [1], [3])  # mixed: no all-correct group, p_easy back to 0.50
        kept += 0 in selector.select(1)
    # prompt 0 comes first half the time and is then kept with probability 0.50; otherwise prompt 1 fills the batch
    assert abs(kept / 400 - 0.5 * 0.50) < 0.07
