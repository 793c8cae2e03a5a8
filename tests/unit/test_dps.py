"""DPS against a scalar transcription of the authors' `BayesianHMMSampler` (maoyixiu/DPS, recipe/dps/task_sampler.py)."""

import numpy as np
import pytest

from trl_kgps.selectors import DPSSelector
from trl_kgps.selectors.dps import PRIORS


class ScalarDPS:
    """
    The authors' update, one prompt at a time over a dict of the prompts seen, as their code runs it: prompts enter
    the dict as candidates or when observed; `train` moves the observed prompts by their observation and every other
    prompt of the dict by one step of the chain. Two departures, both the library's: their `np.argsort(-p)` is made
    stable, so ties go to the first candidate; and a move with no prior count (the `local` preset forbids all wrong
    <-> all right) adds no count, where their code divides 0 by 0.
    """

    def __init__(self, prior, decay):
        self.prior = PRIORS[prior] if isinstance(prior, str) else np.full((3, 3), float(prior))
        self.decay = decay
        self.alphas, self.pis, self.pis_before = {}, {}, {}

    def get(self, i):
        if i not in self.alphas:
            self.alphas[i], self.pis[i], self.pis_before[i] = self.prior, np.full(3, 1 / 3), np.full(3, 1 / 3)
        return self.alphas[i], self.pis[i], self.pis_before[i]

    def expected(self, alpha):
        return alpha / alpha.sum(axis=0, keepdims=True)

    def predict_next_state(self, alpha, pi):
        nxt = np.dot(self.expected(alpha), pi)
        return nxt / nxt.sum()

    def update_transition_params(self, alpha, pi, pi_next, learning_rate):
        numerator = np.outer(pi_next, pi) * self.expected(alpha)
        denominator = numerator.sum()
        update = numerator / denominator * learning_rate if denominator else 0.0  # theirs: 0 / 0 (see the class)
        return alpha * self.decay + self.prior * (1 - self.decay) + update

    def sample_batch(self, candidates, batch_size):
        """Their top-B: the candidates' chance of a mixed group, and the `batch_size` largest of it."""
        mixed = np.array([self.get(i)[1][1] for i in candidates])
        return mixed, np.sort(mixed)[::-1][:batch_size]

    def train(self, indices, rates):
        for i, rate in zip(indices, rates):
            alpha, _, pi_before = self.get(i)
            pi_new = np.zeros(3)
            pi_new[0 if rate == 0 else 2 if rate == 1 else 1] = 1.0
            alpha_new = self.update_transition_params(alpha, pi_before, pi_new, 1.0)
            self.alphas[i], self.pis_before[i], self.pis[i] = (
                alpha_new,
                pi_new,
                self.predict_next_state(alpha_new, pi_new),
            )
        for i in list(self.alphas):
            if i not in indices:
                alpha, pi, pi_before = self.get(i)
                alpha_new = self.update_transition_params(alpha, pi_before, pi, 0.0)
                self.alphas[i], self.pis_before[i], self.pis[i] = alpha_new, pi, self.predict_next_state(alpha_new, pi)


class Recording(DPSSelector):
    """The library's selector, recording the candidates it draws (to hand the same ones to the transcription)."""

    def _walk(self, count, excluded):
        self.candidates = super()._walk(count, excluded)
        return self.candidates


def replay(prior, decay, steps, num_prompts=12, batch_size=3, candidate_ratio=2.0, seed=0):
    """
    Both over `steps` rounds on a hand-made sequence: prompt i's true state at step t cycles through all wrong,
    mixed, all right at its own pace (`(t // (1 + i % 4) + i) % 3`), so the chain has moves to learn.
    """
    selector = Recording(num_prompts, prior=prior, decay=decay, candidate_ratio=candidate_ratio, seed=seed)
    scalar = ScalarDPS(prior, decay)
    for t in range(steps):
        batch = selector.select(batch_size)
        mixed, top = scalar.sample_batch(selector.candidates.tolist(), batch_size)
        # a top-B of theirs, up to float rounding between tied candidates (all still at 1/3, say)
        position = {int(c): j for j, c in enumerate(selector.candidates)}
        chosen = mixed[[position[i] for i in batch.tolist()]]
        np.testing.assert_allclose(np.sort(chosen)[::-1], top, rtol=0, atol=1e-12, err_msg=f"step {t}")
        state = (t // (1 + batch % 4) + batch) % 3
        successes = np.array([0, 2, 4])[state]
        selector.update(batch, successes, np.full(batch_size, 4))
        scalar.train(batch.tolist(), successes / 4)
    return selector, scalar


@pytest.mark.parametrize("prior", [1.0, "progress", "stability", "local"])
@pytest.mark.parametrize("decay", [0.5, 0.7, 1.0])
def test_every_step_matches_the_authors_update(prior, decay):
    # 12 prompts, 6 candidates a round: every prompt is read every other step or so
    assert_same_beliefs(*replay(prior, decay, steps=80))


@pytest.mark.parametrize("prior", [1.0, "local"])
@pytest.mark.parametrize("decay", [0.5, 0.7])
def test_prompts_unread_for_many_steps_match_the_authors_update(prior, decay):
    # 500 prompts, 4 candidates a round: a prompt is read about every 125 steps, more than the exact steps of decay
    # 0.5 (54) and 0.7 (105), so observed prompts catch up by the exact chain and then by repeated squaring, and
    # prompts only ever drawn as candidates by powers of the prior's T
    selector, scalar = replay(prior, decay, steps=300, num_prompts=500, batch_size=2, candidate_ratio=2.0)
    assert (selector.steps - selector.touched[selector.touched >= 0]).max() > selector._exact_steps
    assert selector._counted.sum() > 300 and (~selector._counted & (selector.touched >= 0)).sum() > 50
    assert_same_beliefs(selector, scalar)


def assert_same_beliefs(selector, scalar):
    seen = sorted(scalar.alphas)
    np.testing.assert_allclose(selector.state_distribution(seen), [scalar.pis[i] for i in seen], rtol=0, atol=1e-12)
    A, _, pi_before = selector._advanced(np.array(seen), selector.steps)
    np.testing.assert_allclose(A, [scalar.alphas[i] for i in seen], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pi_before, [scalar.pis_before[i] for i in seen], rtol=0, atol=1e-12)


def test_a_prompt_never_drawn_stays_at_the_prior_and_one_drawn_moves():
    selector = DPSSelector(100, prior="progress", candidate_ratio=2.0, seed=0)
    batch = selector.select(2)  # 4 candidates: registered, so each later step moves them
    selector.update(batch, [0, 4], [4, 4])
    candidates = np.flatnonzero(selector.touched == 0)
    assert candidates.size == 2 and np.isin(candidates, batch, invert=True).all()
    never = np.setdiff1d(np.arange(100), np.flatnonzero(selector.touched >= 0))
    np.testing.assert_array_equal(selector.state_distribution(never), np.full((never.size, 3), 1 / 3))
    T = PRIORS["progress"] / PRIORS["progress"].sum(axis=0)  # one step of the chain from the uniform belief
    expected = T @ np.full(3, 1 / 3)  # a drawn prompt not observed: pi <- T(A0) pi, and A stays A0
    np.testing.assert_allclose(selector.state_distribution(candidates), [expected / expected.sum()] * 2, atol=1e-15)


def test_the_top_b_by_chance_of_a_mixed_group_from_a_hand_computed_step():
    # prior 1, decay 0.5, one observation from the uniform belief: A[o, :] gains 1/3 each, so T(A)[:, o] puts
    # (1 + 1/3) / (3 + 1/3) = 0.4 on o and 0.3 on each other state
    selector = DPSSelector(6, candidate_ratio=2.0, decay=0.5, seed=0)
    selector.update([0, 1, 2], [0, 2, 4], [4, 4, 4])
    np.testing.assert_allclose(
        selector.state_distribution([0, 1, 2]), [[0.4, 0.3, 0.3], [0.3, 0.4, 0.3], [0.3, 0.3, 0.4]], atol=1e-15
    )
    # the pool is all six: the mixed one (0.4) first, then the three never seen (1/3), never 0 or 2 (0.3)
    batch = selector.select(4)
    assert batch[0] == 1 and set(batch[1:]) == {3, 4, 5}
    np.testing.assert_allclose(selector.predicted_success([0, 1, 2]), [0.45, 0.5, 0.55], atol=1e-15)


def test_a_round_reads_only_its_candidates():
    selector = DPSSelector(100_000, candidate_ratio=4.0, seed=0)
    for _ in range(3):
        batch = selector.select(8)
        selector.update(batch, np.full(8, 2), np.full(8, 4))
    assert np.count_nonzero(selector.touched >= 0) == 3 * 32


def test_bad_hyperparameters_are_refused():
    for kwargs, message in (
        ({"prior": "optimistic"}, "not one of"),
        ({"prior": 0.0}, "positive float"),
        ({"decay": 1.5}, r"\[0, 1\]"),
        ({"candidate_ratio": 0.5}, ">= 1"),
        ({"entropy_weight": -1.0}, ">= 0"),
    ):
        with pytest.raises(ValueError, match=message):
            DPSSelector(10, **kwargs)


def test_a_state_with_counts_out_of_range_is_refused():
    selector = DPSSelector(10)
    state = selector.state_dict()
    state["pi"] = state["pi"] * 2
    with pytest.raises(ValueError, match="corrupted"):
        DPSSelector(10).load_state_dict(state)
    state = DPSSelector.from_state_dict(selector.state_dict()).state_dict()
    assert state["hyperparameters"] == {"prior": 1.0, "decay": 0.7, "candidate_ratio": 32.0, "entropy_weight": 0.0}


def test_an_infinite_candidate_ratio_ranks_every_allowed_prompt():
    # the authors' MATH runs: 32 x 256 candidates exceed the training set, so every prompt is a candidate every step
    selector = DPSSelector(50, candidate_ratio=float("inf"), seed=0)
    selector.update([7, 8, 9], [0, 2, 4], [4, 4, 4])
    assert selector.select(1).tolist() == [8]  # the one mixed group, wherever the walk stands
    assert selector.select(1, exclude=[8]).tolist() not in ([7], [9])  # then the unseen (1/3) before 0.3
    restored = DPSSelector.from_state_dict(selector.state_dict())
    assert restored.candidate_ratio == float("inf") and restored.select(2).tolist() == selector.select(2).tolist()
