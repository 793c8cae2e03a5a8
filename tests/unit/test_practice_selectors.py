"""
What practitioners pick, behind the selector interface, against oracles written here: FG-ExPO's Gaussian curriculum
(its weights by hand, its draw against the exact law of successive sampling on a tiny pool), InSight's acquisition
(scipy's Beta entropy and beta-binomial, a hand value), and offline pass-rate filtering (the kept set, TRL's order
as seeded permutations drawn here); each refuses bad input before any change and resumes bit for bit mid-epoch.
"""

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from trl_kgps import KGPSConfig, PromptSelector
from trl_kgps.selectors import (
    SELECTORS,
    GaussianCurriculumSelector,
    InSightSelector,
    OfflineFilterSelector,
    build_selector,
)
from trl_kgps.selectors.practice import digamma, mutual_information
from trl_kgps.selectors.prior_rates import Rates


def _rates(n: int, seed: int = 0) -> np.ndarray:
    """Pass rates of `n` prompts in 8 samples, with some 0/8 and 8/8."""
    return np.random.default_rng(seed).binomial(8, np.linspace(0.02, 0.98, n)) / 8


BUILDERS = {
    "gaussian": lambda n, seed=0: GaussianCurriculumSelector(n, seed=seed),
    "insight": lambda n, seed=0: InSightSelector(n, seed=seed),
    "offline_filter": lambda n, seed=0: OfflineFilterSelector(n, _rates(n), seed=seed),
}


def _same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(a[key], b[key]) if isinstance(a[key], np.ndarray) else a[key] == b[key] for key in a
    )


# The interface ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", BUILDERS)
def test_registered_under_their_names(name):
    assert SELECTORS[name] is type(BUILDERS[name](10))
    assert isinstance(BUILDERS[name](10), PromptSelector)


@pytest.mark.parametrize("name", BUILDERS)
def test_a_state_saved_mid_epoch_continues_bit_for_bit(name):
    rng = np.random.default_rng(0)
    selector = BUILDERS[name](60, seed=3)
    for _ in range(3):  # mid-epoch: the offline filter keeps 40-50 prompts, 3 batches of 7 are not an epoch
        batch = selector.select(7, exclude=[0, 1, 2])
        assert batch.size == 7 == np.unique(batch).size and not np.isin(batch, [0, 1, 2]).any()
        selector.predict(0.1)
        selector.update(batch, rng.binomial(8, 0.5, 7), np.full(7, 8))
    twin = type(selector).from_state_dict(selector.state_dict())
    other = BUILDERS[name](60, seed=99)
    other.load_state_dict(selector.state_dict())
    for _ in range(12):  # past the epoch's end
        batches = [s.select(7, exclude=[5]) for s in (selector, twin, other)]
        np.testing.assert_array_equal(batches[0], batches[1])
        np.testing.assert_array_equal(batches[0], batches[2])
        s = rng.binomial(8, 0.3, 7)
        for each, batch in zip((selector, twin, other), batches):
            each.update(batch, s, np.full(7, 8))
    np.testing.assert_array_equal(selector.predicted_success(), twin.predicted_success())
    mine, theirs = selector.state_dict(), other.state_dict()
    assert theirs.pop("seed") == 99 and _same_state({**mine, "seed": None}, {**theirs, "seed": None})


@pytest.mark.parametrize("name", BUILDERS)
def test_bad_input_is_refused_before_any_change(name):
    selector = BUILDERS[name](20, seed=0)
    selector.update([3, 4], [2, 8], [8, 8])
    before = selector.state_dict()
    for call in (
        lambda: selector.select(0),
        lambda: selector.select(21),
        lambda: selector.select(2.5),
        lambda: selector.select(2, exclude=[20]),
        lambda: selector.update([20], [1], [2]),
        lambda: selector.update([0], [3], [2]),
        lambda: selector.update([0, 1], [1], [2, 2]),
        lambda: selector.predict(float("nan")),
        lambda: BUILDERS[name](21).load_state_dict(before),
    ):
        with pytest.raises(ValueError):
            call()
    assert _same_state(selector.state_dict(), before)
    with pytest.raises(ValueError, match="prompts"):
        BUILDERS[name](21).load_state_dict(before)


def test_corrupted_states_change_nothing():
    for selector, key, value in (
        (GaussianCurriculumSelector(10), "pass_rate", np.full(10, 1.5)),
        (GaussianCurriculumSelector(10), "hyperparameters", {"width": -1.0, "smoothing": 0.9}),
        (InSightSelector(10), "alpha", np.zeros(10)),
        (InSightSelector(10), "group_size_seen", 0),
        (OfflineFilterSelector(10, _rates(10)), "order", np.zeros(OfflineFilterSelector(10, _rates(10)).kept.size)),
        (OfflineFilterSelector(10, _rates(10)), "pass_rates", _rates(10, seed=1)),
    ):
        before = selector.state_dict()
        with pytest.raises(ValueError):
            selector.load_state_dict({**type(selector).from_state_dict(before).state_dict(), key: value})
        assert _same_state(selector.state_dict(), before)


# FG-ExPO's Gaussian curriculum ------------------------------------------------------------------------------------


def test_gaussian_defaults_are_the_authors():
    selector = GaussianCurriculumSelector(5)
    assert (selector.width, selector.smoothing, selector.CENTER) == (0.35, 0.9, 0.5)
    np.testing.assert_array_equal(selector.weights(), np.ones(5))  # unseen: p~ = 1/2, the first batches uniform


def test_gaussian_rates_move_by_the_moving_average_and_weigh_by_the_gaussian():
    selector = GaussianCurriculumSelector(4, width=0.35, smoothing=0.9)
    selector.update([0, 1], [8, 2], [8, 8])
    selector.update([0, 0], [0, 0], [4, 4])  # pooled: one group of 0/8
    expected = [0.9 * (0.9 * 0.5 + 0.1 * 1.0) + 0.1 * 0.0, 0.9 * 0.5 + 0.1 * 0.25, 0.5, 0.5]
    np.testing.assert_allclose(selector.predicted_success(), expected, rtol=1e-15)
    weights = [math.exp(-((p - 0.5) ** 2) / (2 * 0.35**2)) for p in expected]
    np.testing.assert_allclose(selector.weights(), weights, rtol=1e-15)
    last = GaussianCurriculumSelector(2, smoothing=0.0)  # weighs by the last group's share
    last.update([0], [3], [8])
    last.update([0], [6], [8])
    assert last.predicted_success()[0] == 0.75


def _pair_law(weights: np.ndarray, allowed: list[int]) -> dict[tuple, float]:
    """The exact law of the set of 2 drawn one after the other without replacement, each in proportion to `weights`."""
    law = {}
    total = sum(weights[i] for i in allowed)
    for first, second in itertools.permutations(allowed, 2):
        p = weights[first] / total * weights[second] / (total - weights[first])
        key = tuple(sorted((first, second)))
        law[key] = law.get(key, 0.0) + p
    return law


@pytest.mark.parametrize("exclude", [None, [2]])
def test_gaussian_batches_follow_successive_sampling_in_proportion_to_the_weights(exclude):
    selector = GaussianCurriculumSelector(5, width=0.2, smoothing=0.0, seed=7)
    selector.update([0, 1, 2, 3, 4], [0, 2, 4, 7, 8], [8, 8, 8, 8, 8])
    weights = np.exp(-((np.array([0, 2, 4, 7, 8]) / 8 - 0.5) ** 2) / (2 * 0.2**2))
    allowed = [i for i in range(5) if exclude is None or i not in exclude]
    law = _pair_law(weights, allowed)
    draws = 12_000
    counts = dict.fromkeys(law, 0)
    for _ in range(draws):
        counts[tuple(sorted(selector.select(2, exclude=exclude).tolist()))] += 1
    observed = np.array([counts[key] for key in law])
    expected = np.array([law[key] for key in law]) * draws
    assert stats.chisquare(observed, expected).pvalue > 1e-3


# InSight ---------------------------------------------------------------------------------------------------------


def test_digamma_matches_scipys():
    x = np.concatenate([np.geomspace(1e-4, 1e7, 400), [1.0, 2.0, 9.999999, 10.0, 10.000001]])
    np.testing.assert_allclose(digamma(x), special.digamma(x), rtol=1e-13, atol=1e-13)


def _scipy_information(a: float, b: float, K: int) -> float:
    posterior = sum(stats.betabinom.pmf(s, K, a, b) * stats.beta(a + s, b + K - s).entropy() for s in range(K + 1))
    return float(stats.beta(a, b).entropy() - posterior)


@pytest.mark.parametrize("K", [1, 4, 8, 16])
def test_mutual_information_matches_scipys_beta_entropy_and_beta_binomial(K):
    rng = np.random.default_rng(K)
    a = np.concatenate([[1.0, 0.3], rng.uniform(0.5, 40, 6), [900.0]])
    b = np.concatenate([[1.0, 5.0], rng.uniform(0.5, 40, 6), [450.0]])
    expected = [_scipy_information(x, y, K) for x, y in zip(a, b)]
    np.testing.assert_allclose(mutual_information(a, b, K), expected, rtol=1e-8, atol=1e-13)


def test_mutual_information_of_one_rollout_under_a_uniform_prior_is_ln2_minus_a_half():
    # H(U(0, 1)) = 0; after one reward, Beta(2, 1) or Beta(1, 2): ln B(2, 1) - psi(2) + psi(3) = -ln 2 + 1/2
    assert mutual_information(np.array([1.0]), np.array([1.0]), 1)[0] == pytest.approx(math.log(2) - 0.5, rel=1e-14)


def test_insight_defaults_are_the_authors():
    selector = InSightSelector(5)
    assert (selector.group_size, selector.sharpness, selector.target) == (None, 3.0, 0.3)
    assert (selector.candidate_ratio, selector.decay, selector.scored_group_size) == (16.0, 1.0, 8)
    np.testing.assert_array_equal(selector.alpha, np.ones(5))
    np.testing.assert_array_equal(selector.beta, np.ones(5))


def test_insight_scores_are_the_difficulty_weight_times_the_information():
    selector = InSightSelector(6, decay=0.5)
    selector.update([0, 1, 2, 3, 3], [0, 2, 6, 1, 2], [8, 8, 8, 4, 4])
    # Eq. 6 with lambda = 1/2 from Beta(1, 1): alpha = 0.5 + 0.5 + s, beta = 0.5 + 0.5 + (k - s); 3's groups pooled
    np.testing.assert_array_equal(selector.alpha, [1, 3, 7, 4, 1, 1])
    np.testing.assert_array_equal(selector.beta, [9, 7, 3, 6, 1, 1])
    assert selector.scored_group_size == 8
    for i, (a, b) in enumerate(zip(selector.alpha, selector.beta)):
        mean = a / (a + b)
        weight = mean * (1 - mean) * math.exp(-3.0 * (mean - 0.3) ** 2)
        assert selector.scores([i])[0] == pytest.approx(weight * _scipy_information(a, b, 8), rel=1e-9)
    np.testing.assert_allclose(selector.predicted_success(), selector.alpha / (selector.alpha + selector.beta))
    # by hand: an unseen prompt, one rollout: 1/4 exp(-3 (0.2)^2) (ln 2 - 1/2)
    one = InSightSelector(2, group_size=1)
    assert one.scores([0])[0] == pytest.approx(0.25 * math.exp(-0.12) * (math.log(2) - 0.5), rel=1e-13)


def test_insight_evidence_lowers_a_score_that_difficulty_alone_keeps():
    selector = InSightSelector(3)
    selector.update([1, 2], [3, 33], [10, 100])  # Beta(4, 8) and Beta(34, 68): the same mean 1/3, 8.5 x the evidence
    a, b, c = selector.scores()
    np.testing.assert_allclose(selector.predicted_success([1, 2]), [1 / 3, 1 / 3], rtol=1e-15)
    assert b > 3 * c > 0  # the same difficulty weight: the evidence term alone lowers the score


def _observe(selector: InSightSelector) -> InSightSelector:
    rng = np.random.default_rng(1)
    selector.update(np.arange(30), rng.integers(0, 9, 30), np.full(30, 8))
    selector.update(np.arange(0, 30, 3), rng.integers(0, 9, 10), np.full(10, 8))  # unequal evidence
    return selector


def test_insight_takes_the_best_scores_of_every_allowed_prompt_when_candidates_cover_the_pool():
    selector = _observe(InSightSelector(30, candidate_ratio=float("inf"), seed=2))
    scores = [
        (a / (a + b)) * (b / (a + b)) * math.exp(-3 * (a / (a + b) - 0.3) ** 2) * _scipy_information(a, b, 8)
        for a, b in zip(selector.alpha, selector.beta)
    ]
    best = sorted((scores[i] for i in range(30) if i not in (4, 7)), reverse=True)  # ties: any of them
    chosen = selector.select(5, exclude=[4, 7])
    assert not np.isin(chosen, [4, 7]).any()
    np.testing.assert_allclose(sorted((scores[i] for i in chosen), reverse=True), best[:5], rtol=1e-9)
    covering = _observe(InSightSelector(30, seed=2))  # 16 x 2 candidates cover 30 prompts: the same rule
    np.testing.assert_allclose(
        sorted((scores[i] for i in covering.select(2)), reverse=True), sorted(scores, reverse=True)[:2], rtol=1e-9
    )


def test_insight_keeps_the_best_of_candidates_drawn_uniformly():
    # Half the pool seen (Beta(4, 6)), half unseen (Beta(1, 1), the higher score): a round of B = 10 keeps
    # min(H, 10) unseen prompts, H ~ Hypergeometric(400, 200, 20) the unseen among its 20 uniform candidates.
    selector = InSightSelector(400, candidate_ratio=2.0, seed=5)
    selector.update(np.arange(200), np.full(200, 3), np.full(200, 8))
    assert selector.scores([300])[0] > selector.scores([0])[0]
    unseen = np.array([np.count_nonzero(selector.select(10) >= 200) for _ in range(400)])
    h = np.arange(21)
    kept = np.minimum(h, 10)
    pmf = stats.hypergeom(400, 200, 20).pmf(h)
    mean, sd = float(kept @ pmf), math.sqrt(float((kept**2) @ pmf) - float(kept @ pmf) ** 2)
    assert abs(unseen.mean() - mean) < 4 * sd / math.sqrt(unseen.size)
    assert abs(unseen.std() - sd) < 0.2 * sd


# Offline pass-rate filtering --------------------------------------------------------------------------------------


def test_offline_filter_keeps_the_prompts_sometimes_solved_and_walks_them_in_trls_order():
    rates = np.array([0, 3, 8, 1, 7, 0, 8, 4, 5, 2, 6, 8]) / 8
    kept = np.array([1, 3, 4, 7, 8, 9, 10])
    selector = OfflineFilterSelector(12, rates, seed=4)
    np.testing.assert_array_equal(selector.kept, kept)
    # TRL's order over the kept prompts: consecutive slices of seeded permutations, drawn here
    reference = np.random.Generator(np.random.PCG64(4))
    walk = np.concatenate([kept[reference.permutation(7)] for _ in range(3)])
    batches = np.concatenate([selector.select(7) for _ in range(3)])
    np.testing.assert_array_equal(batches, walk)
    np.testing.assert_allclose(selector.predicted_success(), rates)  # the profiled rates before any rollout
    selector.update([1], [8], [8])
    assert selector.predicted_success([1])[0] == 1.0


def test_offline_filter_postpones_a_pending_prompt_within_its_epoch():
    selector = OfflineFilterSelector(12, np.array([0, 3, 8, 1, 7, 0, 8, 4, 5, 2, 6, 8]) / 8, seed=0)
    order = np.array([1, 3, 4, 7, 8, 9, 10])[np.random.Generator(np.random.PCG64(0)).permutation(7)]
    np.testing.assert_array_equal(selector.select(2), order[:2])
    np.testing.assert_array_equal(selector.select(2, exclude=[order[2], 0]), order[3:5])  # order[2] pending: waits
    np.testing.assert_array_equal(selector.select(3), order[[2, 5, 6]])  # its turn comes in the same epoch


def test_offline_filter_refuses_a_batch_larger_than_what_it_keeps_naming_the_numbers_and_the_fix():
    selector = OfflineFilterSelector(10, np.array([0, 1, 0.5, 0.25, 1, 0, 0.75, 0.5, 1, 0]), seed=0)
    before = selector.state_dict()
    with pytest.raises(ValueError, match=r"keeps 4 of 10 prompts \(6 dropped.*0 of them pending: 4 can be chosen"):
        selector.select(5)
    with pytest.raises(ValueError, match=r"2 of them pending: 2 can be chosen.*selector='uniform'"):
        selector.select(3, exclude=[2, 3, 0])
    assert _same_state(selector.state_dict(), before)
    assert selector.select(4).size == 4


@pytest.mark.parametrize(
    "rates, match",
    [
        ([0.5, float("nan"), 0.25], r"pass_rates\[1\] is nan"),
        ([0.5, 1.5, 0.25], r"pass_rates\[1\] is 1.5"),
        ([0.5, 0.25], r"shape \(3,\)"),
        (["a", "b", "c"], "numbers in"),
        ([0.0, 1.0, 1.0], "keep no prompt: of 3, 1 were never solved and 2 always"),
    ],
)
def test_offline_filter_refuses_rates_it_cannot_filter_by(rates, match):
    with pytest.raises(ValueError, match=match):
        OfflineFilterSelector(3, rates)


# The registry: `selector="offline_filter"` reads its rates from the `prior_column` ------------------------------


def test_build_selector_reads_offline_filters_rates_from_the_prior_column():
    rates = _rates(30)
    config = KGPSConfig(prior_column="pass_rate")
    for values in (rates, Rates("pass_rate", rates.tolist())):  # as `read_features` returns the column, or an array
        built = build_selector("offline_filter", 30, config, seed=3, features={"pass_rate": values})
        np.testing.assert_array_equal(built.select(9), OfflineFilterSelector(30, rates, seed=3).select(9))
    with pytest.raises(ValueError, match=r"KGPSConfig\(prior_column=...\).*unset"):
        build_selector("offline_filter", 30, KGPSConfig(), seed=3)
    with pytest.raises(ValueError, match="no values of its pass-rate column prior_column='pass_rate'"):
        build_selector("offline_filter", 30, config, seed=3)
    assert type(build_selector("gaussian", 30)) is GaussianCurriculumSelector
    assert type(build_selector("insight", 30)) is InSightSelector


# The CPU suite's methods -----------------------------------------------------------------------------------------


class _Rows:
    """The training rows as the suite reads them: a length and a `prompt` column."""

    def __init__(self, prompts):
        self.prompts = prompts

    def __len__(self):
        return len(self.prompts)

    def __getitem__(self, column):
        assert column == "prompt"
        return self.prompts


@pytest.mark.parametrize("copies", [1, 3])
def test_the_suites_offline_filter_profiles_the_warm_start_and_counts_the_profiling(copies):
    from benchmarks.realcpu import methods

    p = np.linspace(0.0, 1.0, 40)
    rows = np.random.default_rng(0).permutation(np.repeat(np.arange(40), copies))  # copies of a prompt, shuffled
    train = _Rows([f"q{i:02d}" for i in rows])
    regime = type("Regime", (), {"num_generations": 8})()
    setting = type("Setting", (), {"regime": regime, "train": train, "true_success": lambda self, m, d: p[rows]})()
    selector, config = methods.build("offline_filter", setting, model=None, seed=6)
    expected = np.random.default_rng([6, methods.PROFILE_STREAM]).binomial(8, p) / 8  # Binomial(8, p) per prompt
    np.testing.assert_array_equal(selector.pass_rates, expected[rows])
    assert type(selector) is OfflineFilterSelector and config == KGPSConfig()
    assert methods.profiling_rollouts("offline_filter", setting) == 8 * 40
    assert methods.profiling_rollouts("gaussian", setting) == 0
    assert all(methods.known(name) for name in methods.PRACTICE) and not set(methods.PRACTICE) & set(methods.SUITE)
    assert methods.build("gaussian", setting, None, 0) == ("gaussian", KGPSConfig())
    assert methods.build("insight", setting, None, 0) == ("insight", KGPSConfig())
