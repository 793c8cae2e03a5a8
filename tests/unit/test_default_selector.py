"""The default's departures from the paper, each against an independent oracle (scipy, exact sums, hand values)."""

import dataclasses
import itertools

import numpy as np
import pytest
from reference import posterior_by_quadrature
from scipy import integrate, stats

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.selectors._binomial import posterior_moments, predictive_moments
from trl_kgps.selectors._draw import CandidatePass, draw, random_candidates, whole_pool_draw
from trl_kgps.selectors._utility import expected_mixed_group_probability, mixed_group_probability
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector


@pytest.mark.parametrize(
    "m, P, s, k",
    [(0.0, 1.0, 8, 8), (0.0, 1.0, 4, 8), (2.5, 0.3, 0, 8), (-3.0, 4.0, 1, 16), (1.0, 20.0, 64, 64), (0.0, 1e-3, 0, 8)],
)
def test_binomial_update_matches_the_exact_posterior_moments(m, P, s, k):
    mean, var = posterior_moments(np.array([m]), np.array([P]), np.array([s]), np.array([k]))
    exact_mean, exact_var = posterior_by_quadrature(m, P, s, k)
    assert mean[0] == pytest.approx(exact_mean, abs=1e-4)
    assert var[0] == pytest.approx(exact_var, rel=1e-3)


def test_repeated_unanimous_groups_keep_moving_the_belief_where_the_paper_stops():
    exact = KGPSSelector(1, KGPSConfig(observation="binomial"))
    paper = KGPSSelector(1, KGPSConfig.paper(warmup_epochs=0))
    means = []
    for _ in range(5):
        for selector in (exact, paper):
            selector.update([0], [8], [8])
        means.append((exact.mean[0], paper.mean[0]))
    assert all(b[0] > a[0] + 0.1 for a, b in itertools.pairwise(means))
    assert means[-1][1] < np.log(15) + 1e-6  # the paper's clipped logit log(15) bounds its mean
    assert means[-1][0] > means[-1][1]


def test_predictive_moments_match_the_beta_binomial_like_mixture_exactly():
    m, P, k = 0.7, 2.0, 8
    pmf = [
        integrate.quad(
            lambda x, j=j: stats.norm.pdf(x, m, np.sqrt(P)) * stats.binom.pmf(j, k, 1 / (1 + np.exp(-x))), -40, 40
        )[0]
        for j in range(k + 1)
    ]
    values = np.arange(k + 1)
    mean = float(values @ pmf)
    var = float(values**2 @ pmf) - mean**2
    E, V = predictive_moments(np.array([m]), np.array([P]), np.array([k]))
    assert E[0] == pytest.approx(mean, rel=1e-4) and V[0] == pytest.approx(var, rel=1e-3)


def test_nis_is_one_on_average_when_the_belief_is_the_truth():
    rng = np.random.default_rng(0)
    N = 20000
    selector = KGPSSelector(N, KGPSConfig(initial_variance=1.5, shared_variance=0.0))  # one filter per prompt
    psi = rng.normal(0.0, np.sqrt(1.5), N)  # drawn from the prior the selector holds
    selector.update(np.arange(N), rng.binomial(8, 1 / (1 + np.exp(-psi))), np.full(N, 8))
    assert selector.last_nis == pytest.approx(1.0, abs=0.03)


def test_adaptive_process_noise_grows_when_prompts_drift_faster_than_predicted_and_shrinks_when_slower():
    def final_gamma(step_size):
        rng = np.random.default_rng(1)
        N, B = 400, 40
        selector = KGPSSelector(N, KGPSConfig(process_noise_adaptation=0.05, gamma=0.1), seed=0)  # the default
        psi = rng.normal(0, 1, N)
        for _ in range(300):
            batch = selector.select(B)
            selector.update(batch, rng.binomial(8, 1 / (1 + np.exp(-psi[batch]))), np.full(B, 8))
            psi += rng.normal(0, step_size, N)  # the truth's variance grows by step_size^2 a round
            selector.predict(0.1)  # the filter expects gamma * 0.1 = 0.01 a round
        return selector.gamma

    assert final_gamma(0.5) > 0.3  # 0.25 a round: gamma should approach 2.5
    assert final_gamma(0.0) < 0.1


def test_mixed_group_probability_by_hand_and_its_expectation_by_quadrature():
    p = np.array([0.5, 0.9, 1e-9])
    psi = np.log(p) - np.log1p(-p)
    np.testing.assert_allclose(mixed_group_probability(psi, 8), 1 - p**8 - (1 - p) ** 8, atol=1e-12)
    assert mixed_group_probability(np.array([60.0, -60.0]), 8) == pytest.approx([0.0, 0.0], abs=1e-20)
    m, P = 1.3, 2.2
    exact = integrate.quad(
        lambda x: stats.norm.pdf(x, m, np.sqrt(P)) * mixed_group_probability(np.array([x]), 8)[0], -30, 30
    )[0]
    assert expected_mixed_group_probability(np.array([m]), np.array([P]), 8, 20)[0] == pytest.approx(exact, rel=1e-4)
    assert expected_mixed_group_probability(np.array([m]), np.array([P]), 8, 5)[0] == pytest.approx(exact, rel=0.02)


def test_sampling_draws_the_first_prompt_in_proportion_to_its_score():
    rng = np.random.default_rng(0)
    scores = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    first = np.array([draw(np.arange(5), scores, 1, "sample", rng)[0] for _ in range(20000)])
    counts = np.bincount(first, minlength=5)
    assert counts[4] == 0
    assert stats.chisquare(counts[:4], 20000 * scores[:4]).pvalue > 1e-3


def test_sampling_without_replacement_follows_plackett_luce_by_hand():
    # P(first a, then b) = w_a / W * w_b / (W - w_a)
    rng = np.random.default_rng(1)
    scores = np.array([1.0, 2.0, 3.0])
    pairs = [tuple(draw(np.arange(3), scores, 2, "sample", rng)) for _ in range(30000)]
    observed = np.array([pairs.count((a, b)) for a, b in itertools.permutations(range(3), 2)])
    expected = np.array([scores[a] / 6 * scores[b] / (6 - scores[a]) for a, b in itertools.permutations(range(3), 2)])
    assert stats.chisquare(observed, 30000 * expected).pvalue > 1e-3


def test_temperature_sharpens_the_draw():
    rng = np.random.default_rng(2)
    scores = np.array([1.0, 3.0])
    first = [draw(np.arange(2), scores, 1, "sample", rng, temperature=0.5)[0] for _ in range(20000)]
    assert np.mean(first) == pytest.approx(9 / 10, abs=0.01)  # 3^2 / (1^2 + 3^2)


@pytest.mark.parametrize("temperature", [1e-310, 1e-300, 1e-30])  # 1e-310 is subnormal
def test_a_tiny_temperature_draws_the_limit_the_top_scores_in_order(temperature):
    # Before, log(score) / 1e-310 was -inf for every score below 1, and the batch was the random tie-break's order.
    rng = np.random.default_rng(4)
    scores = rng.uniform(0.0, 0.25, 50)
    for _ in range(20):
        top = np.argsort(-scores)[:8]
        np.testing.assert_array_equal(draw(np.arange(50), scores, 8, "sample", rng, temperature), top)


@pytest.mark.parametrize("temperature", [1e-310, 1e-300])
@pytest.mark.parametrize(
    "config",
    [KGPSConfig(feature_columns=[]), KGPSConfig.per_prompt()],
    ids=["whole_pool", "candidates"],
)
def test_a_selector_with_a_tiny_temperature_chooses_what_top_b_chooses(config, temperature):
    # Distinct scores (each prompt seen in its own number of rollouts): the limit of the draw is the top-B, over the
    # whole pool (by rejection, then its exact fallback) or over the same random candidates.
    def chosen(selection):
        selector = KGPSSelector(200, dataclasses.replace(config, selection=selection), seed=0)
        trials = np.arange(1, 201)
        selector.update(np.arange(200), np.random.default_rng(1).binomial(trials, 0.5), trials)
        assert np.unique(selector.scores()).size >= 198
        return selector.select(8)

    config = dataclasses.replace(config, selection_temperature=temperature)
    np.testing.assert_array_equal(np.sort(chosen("sample")), np.sort(chosen("top")))


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_the_whole_pool_draw_follows_plackett_luce_over_every_prompt_by_hand(temperature):
    # 4 prompts, one excluded: P(a, then b) = w_a / W * w_b / (W - w_a), w = score^(1/T), over the three others.
    rng = np.random.default_rng(6)
    scores = np.array([0.2, 0.0, 0.5, 0.9, 0.7])
    w = scores ** (1 / temperature)
    w[4] = 0.0  # excluded
    pairs = [
        tuple(whole_pool_draw(5, lambda i: scores[i], 1.0, 2, np.array([4]), rng, temperature)) for _ in range(20000)
    ]
    outcomes = [(a, b) for a, b in itertools.permutations([0, 2, 3], 2)]
    observed = np.array([pairs.count(pair) for pair in outcomes])
    expected = np.array([w[a] / w.sum() * w[b] / (w.sum() - w[a]) for a, b in outcomes])
    assert observed.sum() == 20000 and stats.chisquare(observed, 20000 * expected).pvalue > 1e-3


def test_the_whole_pool_draw_by_rejection_matches_the_plain_draw_over_all_prompts():
    # 2000 prompts in four score bands (the rejection path proper, far from its fallback): how often each band is
    # drawn, and how often it is drawn first, as the plain Gumbel draw over all prompts gives them.
    rng = np.random.default_rng(7)
    scores = np.repeat([0.02, 0.3, 0.6, 0.9], 500)
    band = np.repeat(np.arange(4), 500)
    calls = []

    def score(indices):
        calls.append(indices.size)
        return scores[indices]

    chosen = [whole_pool_draw(2000, score, 1.0, 8, np.array([], dtype=np.int64), rng) for _ in range(3000)]
    plain = [draw(np.arange(2000), scores, 8, "sample", rng) for _ in range(3000)]
    assert all(c.size == 8 == np.unique(c).size for c in chosen)
    for statistic in (lambda c: band[c], lambda c: band[c[:1]]):
        ours = np.bincount(np.concatenate([statistic(c) for c in chosen]), minlength=4)
        theirs = np.bincount(np.concatenate([statistic(c) for c in plain]), minlength=4)
        assert stats.chi2_contingency(np.stack([ours, theirs])).pvalue > 1e-3
    assert np.mean(calls) * len(calls) / 3000 < 100  # scores ~ B / acceptance = 8 / 0.455 prompts a round, not 2000


def test_the_whole_pool_draw_of_a_pool_of_near_zero_scores_ends_exactly_over_the_whole_pool():
    rng = np.random.default_rng(8)
    scores = np.full(400, 1e-6)
    scores[[7, 99]] = 0.5
    excluded = np.array([99])
    batches = [whole_pool_draw(400, lambda i: scores[i], 1.0, 3, excluded, rng) for _ in range(500)]
    assert all(b.size == 3 == np.unique(b).size and 99 not in b for b in batches)
    # Prompt 7 carries 0.5 / (0.5 + 398e-6) of the weight: nearly always drawn, nearly always first.
    assert np.mean([b[0] == 7 for b in batches]) > 0.99


def test_random_candidates_are_distinct_uniform_and_never_excluded():
    rng = np.random.default_rng(3)
    excluded = np.array([0, 5, 9])
    counts = np.zeros(10, dtype=int)
    for _ in range(5000):
        pool = random_candidates(10, 4, excluded, rng)
        assert pool.size == 4 == np.unique(pool).size and not np.isin(pool, excluded).any()
        counts[pool] += 1
    assert stats.chisquare(np.delete(counts, excluded)).pvalue > 1e-3
    assert np.array_equal(np.sort(random_candidates(10, 50, excluded, rng)), np.delete(np.arange(10), excluded))


def test_a_candidate_pass_deals_every_prompt_once_then_starts_another():
    rng = np.random.default_rng(4)
    candidate_pass = CandidatePass(10)
    dealt = [candidate_pass.next(3, np.array([], dtype=np.int64), rng) for _ in range(3)]
    first_pass = np.concatenate(dealt + [candidate_pass.next(1, np.array([], dtype=np.int64), rng)])
    assert np.array_equal(np.sort(first_pass), np.arange(10))
    crossing = candidate_pass.next(4, np.array([2, 3]), rng)
    assert crossing.size == 4 == np.unique(crossing).size and not np.isin(crossing, [2, 3]).any()


@pytest.mark.parametrize("selection", ["sample", "top", "thompson"])
@pytest.mark.parametrize("candidates, candidate_pass", [(0.0, False), (4.0, False), (4.0, True)])
def test_every_rule_returns_distinct_selectable_prompts_and_resumes_bit_for_bit(selection, candidates, candidate_pass):
    rng = np.random.default_rng(5)
    config = ExperimentalConfig(selection=selection, candidates=candidates, candidate_pass=candidate_pass)
    selector = ExperimentalSelector(300, config, seed=1)
    restored = None

    def round_(selector, pending, outcomes):
        batch = selector.select(16, exclude=pending)
        assert batch.size == 16 == np.unique(batch).size and not np.isin(batch, pending).any()
        selector.update(batch, outcomes, np.full(16, 8))
        selector.predict(0.2)
        return batch

    pending = np.empty(0, dtype=np.int64)
    for _ in range(15):
        pending = round_(selector, pending, rng.binomial(8, 0.3, 16))
    restored = ExperimentalSelector.from_state_dict(selector.state_dict())
    for _ in range(15):
        outcomes = rng.binomial(8, 0.3, 16)
        batch = round_(selector, pending, outcomes)
        np.testing.assert_array_equal(round_(restored, pending, outcomes), batch)
        pending = batch
    for name, value in selector.state_dict().items():
        np.testing.assert_equal(restored.state_dict()[name], value, err_msg=name)


def test_group_size_follows_the_observations_unless_configured():
    selector = ExperimentalSelector(5)
    assert selector.group_size == 8
    selector.update([0, 1], [3, 4], [16, 16])
    assert selector.group_size == 16
    assert ExperimentalSelector(5, ExperimentalConfig(group_size=4)).group_size == 4


def test_recent_batches_match_a_brute_force_count_over_the_window():
    from trl_kgps.engine.ledger import RecentBatches

    rng = np.random.default_rng(6)
    recent, history = RecentBatches(50, window=5), []
    for _ in range(40):
        batch = rng.choice(50, 8, replace=False)
        repeats = recent.add(batch)
        expected_repeats = np.isin(batch, history[-1]).mean() if history else 0.0
        history.append(batch)
        assert repeats == expected_repeats
        assert recent.unique_prompts == np.unique(np.concatenate(history[-5:])).size


def test_a_state_with_a_bad_drift_is_refused_and_leaves_the_selector_unchanged():
    selector = ExperimentalSelector(10, ExperimentalConfig(shared_drift=0.1, shared_variance=0.0), seed=3)
    selector.update([0, 1], [8, 0], [8, 8])
    before = selector.state_dict()
    bad = {**before, "mean": np.full(10, 1.5, dtype=np.float32), "drift": float("nan")}
    with pytest.raises(ValueError, match="drift"):
        selector.load_state_dict(bad)
    for name, value in selector.state_dict().items():
        np.testing.assert_equal(value, before[name], err_msg=name)
