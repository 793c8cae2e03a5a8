"""
Gamma's online calibration, the default's (`process_noise_adaptation=0.05`): the rule against a hand computation and
its bounds, the presets that keep gamma fixed, the experimental selector running it bit for bit, and its state.
"""

import math
import pickle
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector


N, B, K = 400, 32, 8
ETA = 0.05


def exact_nis(m: float, P: float, s: np.ndarray, k: int) -> float:
    """The batch's mean `(s - E[s])^2 / Var[s]` under the prior `N(m, P)`, the predictive moments by scipy's quad."""

    def moment(f):
        return integrate.quad(lambda x: stats.norm.pdf(x, m, math.sqrt(P)) * f(1 / (1 + math.exp(-x))), -40, 40)[0]

    mean_p, mean_p2 = moment(lambda p: p), moment(lambda p: p * p)
    predicted = k * mean_p
    spread = k * (mean_p - mean_p2) + k * k * (mean_p2 - mean_p**2)  # E[k p (1 - p)] + Var[k p]
    return float(np.mean((s - predicted) ** 2 / spread))


def test_one_batch_multiplies_gamma_by_exp_of_the_step_times_nis_minus_one():
    config = KGPSConfig.per_prompt(process_noise_adaptation=ETA, initial_variance=1.5)
    selector = KGPSSelector(6, config)
    s = np.array([8, 0, 5])
    selector.update([0, 1, 2], s, [K] * 3)
    nis = exact_nis(0.0, 1.5, s, K)
    assert selector.last_nis == pytest.approx(nis, rel=1e-3) and nis > 1  # a surprising batch: gamma grows
    assert selector.gamma == pytest.approx(0.1 * math.exp(ETA * (nis - 1)), rel=1e-4)
    first = selector.gamma
    assert first == pytest.approx(0.1 * math.exp(ETA * (selector.last_nis - 1)), rel=1e-15)
    # Q uses the calibrated gamma: an untouched prompt's variance grows by exactly gamma * ||dtheta||
    before = selector.variance[5]
    selector.predict(2.0)
    assert selector.process_noise(2.0) == pytest.approx(2.0 * first, rel=1e-15)
    assert selector.variance[5] == pytest.approx(before + 2.0 * first, rel=1e-6)
    # a second batch, unsurprising (s = k / 2 at m = 0: NIS near 0), multiplies it again, downwards
    selector.update([3], [4], [K])
    assert selector.last_nis < 1
    assert selector.gamma == pytest.approx(first * math.exp(ETA * (selector.last_nis - 1)), rel=1e-15)


def test_the_calibration_stays_within_a_thousandth_and_a_thousand_times_gamma():
    # Every batch a fresh prompt whose prior is almost certain of p = 1/2: all k successes are a surprise of NIS ~ k.
    sure = KGPSSelector(20, KGPSConfig.per_prompt(process_noise_adaptation=ETA, initial_variance=1e-6))
    for i in range(3):
        sure.update([i], [64], [64])  # NIS ~ 64: gamma x e^3.15 each, past 1e3 at the third
        assert sure.last_nis == pytest.approx(64, rel=1e-3)
    assert sure.state_dict()["gamma_scale"] == 1e3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow in exp(): the step lands on the bound
        sure.update([10], [10**6], [10**6])
    assert sure.last_nis > 1e5 and sure.state_dict()["gamma_scale"] == 1e3
    # Every batch exactly what the prior expects (s = k / 2 at m = 0): gamma x e^-0.05 a batch, at 1e-3 after 139.
    calm = KGPSSelector(200, KGPSConfig.per_prompt(process_noise_adaptation=ETA))
    for i in range(200):
        calm.update([i], [4], [K])
    assert calm.last_nis < 0.01 and calm.state_dict()["gamma_scale"] == 1e-3


@pytest.mark.parametrize("preset", [KGPSConfig.paper, KGPSConfig.per_prompt], ids=["paper", "per_prompt"])
def test_the_paper_and_the_per_prompt_filter_keep_gamma_fixed(preset):
    assert preset().process_noise_adaptation == 0.0
    selector = KGPSSelector(20, preset(warmup_epochs=0))
    for i in range(10):
        selector.update([i], [8], [K])  # surprising: would move a calibrated gamma
        selector.predict(1.0)
    assert selector.gamma == 0.1 and selector.state_dict()["gamma_scale"] == 1.0


def drive(selectors, rounds=300, seed=3):
    """
    Rounds of select, predict and update, the same for every one of `selectors` (which must choose the same batches),
    against a truth that drifts by 0.5 a round for 50 rounds, then stands still for 50, and so on: gamma rises, then
    falls. Returns the first selector's gamma after each round.
    """
    rng = np.random.default_rng(seed)
    psi = rng.normal(0.0, 1.0, N)
    gammas = []
    for t in range(rounds):
        batches = [selector.select(B) for selector in selectors]
        for batch in batches[1:]:
            np.testing.assert_array_equal(batch, batches[0], err_msg=f"round {t}")
        successes = rng.binomial(K, 1 / (1 + np.exp(-psi[batches[0]])))
        for selector in selectors:
            selector.update(batches[0], successes, np.full(B, K))
            selector.predict(0.1)
        if (t // 50) % 2 == 0:
            psi += rng.normal(0.0, 0.5, N)
        gammas.append(selectors[0].gamma)
    return np.array(gammas)


@pytest.mark.parametrize(
    "config, variant, features",
    [
        (
            KGPSConfig(process_noise_adaptation=ETA),
            ExperimentalConfig(process_noise_adaptation=ETA),
            {"level": np.arange(N) % 5},
        ),
        (
            KGPSConfig.per_prompt(process_noise_adaptation=ETA),
            ExperimentalConfig.per_prompt(process_noise_adaptation=ETA),
            None,
        ),
    ],
    ids=["default", "per_prompt"],
)
def test_the_experimental_selector_calibrates_gamma_as_the_default_bit_for_bit(config, variant, features):
    plain = KGPSSelector(N, config, seed=4, features=features)
    experimental = ExperimentalSelector(N, variant, seed=4, features=features)
    gammas = drive([plain, experimental])
    # gamma moved both ways: up while the truth drifts, down once the beliefs catch up with a truth standing still
    peak = gammas[:100].max()
    assert peak > 4 * gammas[0] and gammas[99] < 0.8 * peak and gammas[149] > gammas[99]
    np.testing.assert_array_equal(plain.mean, experimental.mean)
    np.testing.assert_array_equal(plain.variance, experimental.variance)
    assert plain.gamma == experimental.gamma
    assert plain.state_dict()["gamma_scale"] == experimental.state_dict()["gamma_scale"]


def test_the_default_round_trips_its_calibration_bit_for_bit():
    original = KGPSSelector(N, KGPSConfig(), seed=2, features={"level": np.arange(N) % 5})
    drive([original], rounds=60)
    scale = original.state_dict()["gamma_scale"]
    assert scale != 1.0
    restored = KGPSSelector(N, KGPSConfig(), seed=99, features={"level": np.arange(N) % 5})
    restored.load_state_dict(pickle.loads(pickle.dumps(original.state_dict())))
    assert restored.state_dict()["gamma_scale"] == scale and restored.gamma == original.gamma
    np.testing.assert_array_equal(drive([restored], seed=5, rounds=40), drive([original], seed=5, rounds=40))
    np.testing.assert_array_equal(restored.mean, original.mean)
    np.testing.assert_array_equal(restored.variance, original.variance)


@pytest.mark.parametrize("selector_class", [KGPSSelector, ExperimentalSelector])
@pytest.mark.parametrize(
    "scale, message",
    [
        (0.0, r"must lie in \[1e-3, 1e3\] \(gamma's calibration\), got 0.0"),
        (-1.0, r"must lie in \[1e-3, 1e3\] \(gamma's calibration\), got -1.0"),
        (1e9, r"must lie in \[1e-3, 1e3\] \(gamma's calibration\), got 1000000000.0"),
        (float("nan"), r"must be finite, got nan"),
        ("1.0", r"must be a number, got '1.0'"),
    ],
)
def test_a_corrupted_gamma_scale_is_refused_naming_it_before_any_change(selector_class, scale, message):
    selector = selector_class(N, seed=6)
    drive([selector], rounds=5)
    donor = selector_class(N, seed=7)  # another state: a partial load would show
    drive([donor], rounds=20, seed=9)
    before = selector.state_dict()
    with pytest.raises(ValueError, match=r"state_dict\['gamma_scale'\] " + message + "; this state is corrupted"):
        selector.load_state_dict({**donor.state_dict(), "gamma_scale": scale})
    for name, value in selector.state_dict().items():
        np.testing.assert_equal(value, before[name], err_msg=name)
