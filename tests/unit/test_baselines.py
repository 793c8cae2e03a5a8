"""
The paper's baselines against references written here, and behind the selector interface. MoPPS and GRESO are checked
against scalar transcriptions of their authors' rules (thu-rllab/MoPPS `recipe/ours/mopps.py` with its data loader;
Infini-AI-Lab/GRESO `verl/trainer/ppo/ray_trainer.py` and `verl/trainer/ttis/presampling_selector.py`), and states
saved before those rules against transcriptions of the rules they were saved under.
"""

import logging
import math

import numpy as np
import pytest

from trl_kgps import KGPSSelector, PromptSelector
from trl_kgps.selectors import (
    ArcusSelector,
    DPSSelector,
    GRESOSelector,
    MoPPSSelector,
    UniformSelector,
    build_selector,
)


ALL = [UniformSelector, MoPPSSelector, GRESOSelector, DPSSelector, ArcusSelector, KGPSSelector]


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
    assert isinstance(selector, PromptSelector)


def test_a_selector_of_ones_own_is_a_prompt_selector_when_it_has_every_member():
    class Cyclic:  # the whole interface: the next prompts in order
        num_prompts, position = 10, 0

        def select(self, batch_size, exclude=None):
            batch = (self.position + np.arange(batch_size)) % self.num_prompts
            self.position += batch_size
            return batch

        def initialize(self, indices, successes, trials): ...
        def update(self, indices, successes, trials): ...
        def predict(self, delta_norm): ...
        def predicted_success(self, indices=None):
            return np.full(self.num_prompts, 0.5)

        def state_dict(self):
            return {"position": self.position}

        def load_state_dict(self, state):
            self.position = state["position"]

    assert isinstance(Cyclic(), PromptSelector)
    del Cyclic.predict
    assert not isinstance(Cyclic(), PromptSelector)


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


def generator(state):
    """A generator continuing from `state` (a PCG64 state dict)."""
    rng = np.random.Generator(np.random.PCG64())
    rng.bit_generator.state = state
    return rng


class ScalarMoPPS:
    """
    The authors' loop one prompt at a time: a data loader whose batches are `ceil(ratio * B)` consecutive prompts of
    an epoch's permutation, the last incomplete one dropped (`drop_last=True`), here also skipping the prompts a round
    excludes (they keep their place in the epoch); one Thompson draw per candidate in loader order; the `B` draws
    nearest the target (ties to the earlier candidate); `alpha <- lambda alpha + (1 - lambda) + s`, likewise `beta`.
    The generator is the selector's seed replayed: its first permutation is drawn at construction.
    """

    def __init__(self, n, ratio, decay, target, seed):
        self.n, self.ratio, self.decay, self.target = n, ratio, decay, target
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.epoch = [int(i) for i in self.rng.permutation(n)]  # the prompts the loader has yet to give this epoch
        self.alpha, self.beta = [1.0] * n, [1.0] * n

    def select(self, batch_size, exclude=()):
        allowed = self.n - len(set(exclude))
        size = allowed if self.ratio * batch_size >= allowed else math.ceil(self.ratio * batch_size)
        if len([i for i in self.epoch if i not in exclude]) < size:
            self.epoch = [int(i) for i in self.rng.permutation(self.n)]
        candidates = []
        for i in list(self.epoch):
            if len(candidates) == size:
                break
            if i not in exclude:
                candidates.append(i)
                self.epoch.remove(i)
        draws = [self.rng.beta(self.alpha[i], self.beta[i]) for i in candidates]
        ranked = sorted(range(len(candidates)), key=lambda j: (abs(draws[j] - self.target), j))
        return [candidates[j] for j in ranked[:batch_size]]

    def update(self, indices, successes, trials):
        for i, s, k in zip(indices, successes, trials):
            self.alpha[i] = self.decay * self.alpha[i] + (1 - self.decay) * 1.0 + s
            self.beta[i] = self.decay * self.beta[i] + (1 - self.decay) * 1.0 + (k - s)


# the authors' scripts: `ts_ratio`, `bandit_decay_ratio` (recipe/ours/scripts/{math,countdown}/*_topk_noinit.sh)
@pytest.mark.parametrize("recipe, ratio, decay", [("math", 16, 1.0), ("countdown", 8, 0.5)])
def test_mopps_candidate_pool_and_picks_match_the_authors_loop(recipe, ratio, decay):
    n, seed = 53, 7
    selector = MoPPSSelector(n, recipe=recipe, seed=seed)
    reference = ScalarMoPPS(n, ratio, decay, 0.5, seed)
    rates = np.random.default_rng(0).uniform(0.05, 0.95, n)
    outcomes = np.random.default_rng(1)
    pending = []
    # B = 1 and 3: pools of 16/8 and 48/24 from 53 prompts (the tail of an epoch dropped); B = 4: every allowed one
    for step, batch_size in enumerate([1, 1, 3, 1, 3, 3, 4, 1, 3, 1, 1, 3, 3, 1] * 4):
        exclude = pending if step % 3 else []  # the batch in flight, as TRL's one-ahead selection excludes it
        batch = selector.select(batch_size, exclude=exclude)
        assert batch.tolist() == reference.select(batch_size, exclude)
        pending = batch.tolist()
        s = outcomes.binomial(8, rates[batch])
        selector.update(batch, s, np.full(batch_size, 8))
        reference.update(batch.tolist(), s.tolist(), [8] * batch_size)
    np.testing.assert_array_equal(selector.alpha, reference.alpha)
    np.testing.assert_array_equal(selector.beta, reference.beta)


def test_mopps_takes_consecutive_candidates_of_an_epoch_and_drops_its_tail():
    selector = MoPPSSelector(40, candidate_ratio=3.0, seed=2)  # pools of 12 from 40 prompts: three, then 4 dropped
    order = selector.state_dict()["order"]
    for pool in range(3):
        picks = selector.select(4)
        assert set(picks.tolist()) <= set(order[12 * pool : 12 * (pool + 1)].tolist())
    picks = selector.select(4)
    assert selector.state_dict()["position"] == 12 and not np.array_equal(selector.state_dict()["order"], order)
    assert set(picks.tolist()) <= set(selector.state_dict()["order"][:12].tolist())


def test_mopps_defaults_are_the_authors_math_recipe():
    math_recipe = {"decay": 1.0, "candidate_ratio": 16.0, "target": 0.5, "decay_to_prior": True, "pool": "epoch"}
    assert MoPPSSelector(10).state_dict()["hyperparameters"] == math_recipe
    assert build_selector("mopps", 10).state_dict()["hyperparameters"] == math_recipe
    for recipe in ("countdown", "geometry3k"):
        selector = MoPPSSelector(10, recipe=recipe)
        assert (selector.decay, selector.candidate_ratio) == (0.5, 8.0)
    selector = MoPPSSelector(10, candidate_ratio=4.0, recipe="countdown")  # an explicit value overrides the recipe's
    assert (selector.decay, selector.candidate_ratio) == (0.5, 4.0)
    for kwargs, message in (
        ({"recipe": "gsm8k"}, "recipe"),
        ({"pool": "random"}, "pool"),
        ({"candidate_ratio": 0.5}, ">= 1"),
        ({"decay": 1.5}, r"\[0.0, 1.0\]"),
        ({"decay_to_prior": 1}, "True or False"),
    ):
        with pytest.raises(ValueError, match=message):
            MoPPSSelector(10, **kwargs)


def test_mopps_infinite_candidate_ratio_ranks_every_allowed_prompt():
    selector = MoPPSSelector(30, candidate_ratio=float("inf"), seed=1)
    selector.update(np.arange(30), np.r_[np.zeros(29), 25], np.full(30, 50))
    assert selector.select(1).tolist() == [29]  # the only prompt whose posterior is not near 0: all are candidates


def old_mopps_state(n, rng_state, alpha, beta):
    """A MoPPS state as trl-kgps saved it before the epoch walk: no `order`, `position`, nor `pool`."""
    return {
        "selector": "mopps",
        "num_prompts": n,
        "rng_state": rng_state,
        "seed": 3,
        "hyperparameters": {"decay": 0.9, "candidate_ratio": 4.0, "target": 0.5, "decay_to_prior": True},
        "alpha": alpha,
        "beta": beta,
    }


def old_mopps_select(rng, alpha, beta, n, batch_size, exclude):
    """Its round, as trl-kgps ran it: `ceil(4 B)` candidates drawn uniformly, then the Thompson draws."""
    allowed = np.setdiff1d(np.arange(n), exclude)
    candidates = rng.choice(allowed, size=min(allowed.size, math.ceil(4.0 * batch_size)), replace=False)
    draws = [rng.beta(alpha[i], beta[i]) for i in candidates]
    ranked = sorted(range(len(candidates)), key=lambda j: (abs(draws[j] - 0.5), j))
    return [int(candidates[j]) for j in ranked[:batch_size]]


@pytest.mark.parametrize("how", ["from_state_dict", "load_state_dict"])
def test_an_old_mopps_state_continues_as_it_would_have(how, caplog):
    n = 40
    start = np.random.default_rng(0)
    alpha, beta = start.uniform(1, 9, n), start.uniform(1, 9, n)
    state = old_mopps_state(n, np.random.Generator(np.random.PCG64(11)).bit_generator.state, alpha, beta)
    if how == "from_state_dict":
        selector = MoPPSSelector.from_state_dict(state)
    else:
        selector = MoPPSSelector(n)  # today's default (the MATH recipe): the state's hyperparameters win
        with caplog.at_level(logging.WARNING):
            selector.load_state_dict(state)
        assert "candidate_ratio=4.0 (was 16.0)" in caplog.text and "pool='uniform' (was 'epoch')" in caplog.text
    assert (selector.decay, selector.candidate_ratio, selector.pool) == (0.9, 4.0, "uniform")
    rng, alpha, beta = generator(state["rng_state"]), alpha.copy(), beta.copy()
    exclude = []
    for _ in range(6):
        batch = selector.select(5, exclude=exclude)
        assert batch.tolist() == old_mopps_select(rng, alpha, beta, n, 5, exclude)
        selector.update(batch, [3] * 5, [8] * 5)
        alpha[batch], beta[batch] = 0.9 * alpha[batch] + 0.1 + 3, 0.9 * beta[batch] + 0.1 + 5
        exclude = batch.tolist()
    np.testing.assert_allclose(selector.alpha, alpha)
    saved = selector.state_dict()  # now with `pool`, `order` and `position`: it round-trips as itself
    assert saved["hyperparameters"]["pool"] == "uniform"
    restored = MoPPSSelector.from_state_dict(saved)
    np.testing.assert_array_equal(restored.select(5), selector.select(5))


def test_a_mopps_state_without_a_walk_starts_a_new_epoch_from_its_generator():
    selector = MoPPSSelector(20, candidate_ratio=2.0, seed=4)
    state = selector.state_dict()
    del state["order"], state["position"]  # e.g. a state that records no hyperparameters nor walk, loaded as "epoch"
    restored = MoPPSSelector(20, candidate_ratio=2.0, seed=99)
    restored.load_state_dict(state)
    rng = generator(state["rng_state"])
    first_epoch = rng.permutation(20)
    assert set(restored.select(3).tolist()) <= set(first_epoch[:6].tolist())


class ScalarGRESO:
    """
    GRESO's walk and adaptation one prompt at a time. The authors' rules: a prompt met in the epoch's order (the
    loader) is skipped with probability `1 - max(p^c, 0.01)` after `c` all-correct (`p_easy`) or all-wrong (`p_hard`)
    groups in a row, and has then had its turn; a prompt the round excludes keeps its place. After a batch, if the
    epoch is past the first: `p_hard <- max(p_hard - 0.01, 0.05)` if its share of all-wrong groups is `>= 0.25 * 2/3`,
    else `min(p_hard + 0.01, 0.95)`; `p_easy` likewise with all-correct groups and `0.25 / 3`.

    `legacy=True`: the rules of states saved before (trl-kgps's earlier GRESO): an excluded prompt met loses its
    turn, `p` adapts from the first batch, and holds when a share equals its target.
    """

    def __init__(self, n, rng, order, position=0, legacy=False):
        self.n, self.rng, self.legacy = n, rng, legacy
        self.left = [int(i) for i in order[position:]]  # the epoch's prompts not yet met
        self.epoch, self.p_easy, self.p_hard = 0, 0.5, 0.5
        self.streak = [0] * n

    def keep(self, i):
        c = self.streak[i]
        return 1.0 if c == 0 else max((self.p_easy if c > 0 else self.p_hard) ** abs(c), 0.01)

    def new_epoch(self):
        self.left, self.epoch = [int(i) for i in self.rng.permutation(self.n)], self.epoch + 1

    def select(self, batch_size, exclude=()):
        chosen, met = [], 0
        while len(chosen) < batch_size:
            if not self.left:
                self.new_epoch()
            if self.legacy:
                i = self.left.pop(0)
                met += 1
                if i not in chosen and i not in exclude and (met > 2 * self.n or self.rng.uniform() < self.keep(i)):
                    chosen.append(i)
                continue
            for i in list(self.left):
                if len(chosen) == batch_size:
                    break
                if i in exclude or i in chosen:
                    continue
                self.left.remove(i)
                met += 1
                if met > 2 * self.n or self.rng.uniform() < self.keep(i):
                    chosen.append(i)
            if len(chosen) < batch_size:
                self.left = []  # only prompts not allowed in this batch are left: the epoch is over
        return chosen

    def update(self, indices, successes, trials):
        for i, s, k in zip(indices, successes, trials):
            c = self.streak[i]
            self.streak[i] = max(c, 0) + 1 if s == k else min(c, 0) - 1 if s == 0 else 0
        easy = sum(s == k for s, k in zip(successes, trials)) / len(indices)
        hard = sum(s == 0 for s in successes) / len(indices)
        if self.legacy:
            for name, share, target in (("p_easy", easy, 0.25 / 3), ("p_hard", hard, 0.25 * 2 / 3)):
                if share != target:
                    p = getattr(self, name) + (0.01 if share < target else -0.01)
                    setattr(self, name, min(max(p, 0.05), 0.95))
        elif self.epoch > 0:
            if hard >= 0.25 * 2 / 3:
                self.p_hard = max(self.p_hard - 0.01, 0.05)
            else:
                self.p_hard = min(self.p_hard + 0.01, 0.95)
            if easy >= 0.25 / 3:
                self.p_easy = max(self.p_easy - 0.01, 0.05)
            else:
                self.p_easy = min(self.p_easy + 0.01, 0.95)


def test_greso_adapts_p_after_the_first_epoch_and_moves_it_down_at_an_exact_tie():
    selector = GRESOSelector(24, seed=0)
    rng = np.random.Generator(np.random.PCG64(0))
    reference = ScalarGRESO(24, rng, rng.permutation(24))  # the selector's seed, and its constructor's draw
    # batches of 12, each with 1 all-correct and 2 all-wrong groups: shares 1/12 and 2/12, exactly the targets
    tie_s = [4, 0, 0] + [2] * 9
    below_s = [2] * 12  # no zero-variance group: both shares below their targets
    above_s = [4, 4, 0, 0, 0] + [2] * 7
    epochs, ps = [], []
    for s in [tie_s, below_s, tie_s, tie_s, below_s, above_s, tie_s, below_s]:
        batch = selector.select(12)
        assert batch.tolist() == reference.select(12)
        selector.update(batch, s, [4] * 12)
        reference.update(batch.tolist(), s, [4] * 12)
        assert (selector.epoch, selector.p_easy, selector.p_hard) == (
            reference.epoch,
            reference.p_easy,
            reference.p_hard,
        )
        epochs.append(selector.epoch)
        ps.append((round(selector.p_easy, 10), round(selector.p_hard, 10)))
    # the first epoch's two batches (24 prompts, none skipped: none observed) hold p at 0.5, tie or not; from the
    # second epoch on, a tie lowers p, as a share above its target does, and a share below raises it
    assert epochs[:2] == [0, 0] and min(epochs[2:]) >= 1
    assert ps == [(0.5, 0.5), (0.5, 0.5), (0.49, 0.49), (0.48, 0.48), (0.49, 0.49), (0.48, 0.48), (0.47, 0.47)] + [
        (0.48, 0.48)
    ]


def test_greso_walk_and_adaptation_match_the_authors_rules_over_a_long_run():
    n, seed = 37, 5
    selector = GRESOSelector(n, seed=seed)
    rng = np.random.Generator(np.random.PCG64(seed))
    reference = ScalarGRESO(n, rng, rng.permutation(n))
    rates = np.random.default_rng(2).choice([0.0, 0.02, 0.5, 0.98, 1.0], n)
    outcomes = np.random.default_rng(3)
    pending, ties = [], 0
    for step in range(120):
        batch_size = 12 if step % 2 else 6
        exclude = pending if step % 4 else []
        batch = selector.select(batch_size, exclude=exclude)
        assert batch.tolist() == reference.select(batch_size, exclude)
        s = outcomes.binomial(4, rates[batch])
        ties += (s == 4).sum() * 12 == batch_size or (s == 0).sum() * 6 == batch_size
        selector.update(batch, s, np.full(batch_size, 4))
        reference.update(batch.tolist(), s.tolist(), [4] * batch_size)
        assert (selector.epoch, selector.p_easy, selector.p_hard) == (
            reference.epoch,
            reference.p_easy,
            reference.p_hard,
        )
        pending = batch.tolist()
    assert ties and selector.epoch > 5 and min(selector.p_easy, selector.p_hard) == 0.05
    np.testing.assert_array_equal(selector.streak, reference.streak)


def test_greso_skip_probabilities_match_the_rule():
    selector = GRESOSelector(4, adapt_after_epochs=0, seed=0)  # adapts from the first batch
    selector.update([0, 1, 2], [4, 0, 2], [4, 4, 4])  # easy, hard, mixed; prompt 3 never observed
    selector.update([0], [4], [4])  # prompt 0: two all-correct groups in a row
    # shares after the first batch: easy 1/3 > 1/12 -> p_easy 0.49; hard 1/3 > 1/6 -> p_hard 0.49
    # after the second: easy 1 -> 0.48; hard 0 < 1/6 -> 0.50
    assert (selector.p_easy, selector.p_hard) == pytest.approx((0.48, 0.50))
    np.testing.assert_allclose(selector._keep_probability(np.arange(4)), [0.48**2, 0.50, 1.0, 1.0])
    selector.p_easy = 0.05
    selector.streak[0] = 5
    assert selector._keep_probability(np.array([0]))[0] == GRESOSelector.EXPLORATION_FLOOR
    default = GRESOSelector(4, seed=0)  # the authors' gate: nothing adapts in the first epoch
    default.update([0, 1, 2], [4, 0, 2], [4, 4, 4])
    assert (default.p_easy, default.p_hard) == (0.5, 0.5)
    for kwargs, message in (
        ({"adapt_after_epochs": -1}, ">= 0"),
        ({"adapt_after_epochs": 1.5}, ">= 0"),
        ({"step": -0.01}, "step"),
        ({"target_zero_variance": 2}, r"\[0, 1\]"),
    ):
        with pytest.raises(ValueError, match=message):
            GRESOSelector(4, **kwargs)


def test_greso_an_excluded_prompt_keeps_its_turn_in_the_epoch():
    selector = GRESOSelector(10, seed=1)
    order = selector.state_dict()["order"].tolist()
    first = selector.select(3, exclude=order[:2])  # never-observed prompts are always kept
    assert first.tolist() == order[2:5]
    assert sorted(selector.select(5).tolist()) == sorted(order[:2] + order[5:8])  # the two waited, then came


def test_greso_keeps_a_prompt_at_its_rate():
    kept = 0
    for seed in range(400):
        selector = GRESOSelector(2, seed=seed)
        selector.update([0, 0], [3, 3], [3, 3])  # pooled, one all-correct group: streak 1; p_easy 0.5 (first epoch)
        selector.update([1], [1], [3])  # mixed
        kept += 0 in selector.select(1)
    # prompt 0 comes first half the time and is then kept with probability 0.50; otherwise prompt 1 fills the batch
    assert abs(kept / 400 - 0.5 * 0.50) < 0.07


def old_greso_state(n, seed):
    """A GRESO state as trl-kgps saved it before the authors' gate and tie: no `epoch`, `rules`, nor
    `adapt_after_epochs`. Its walk is a fresh one of `seed`; prompts 0-5 were all correct once, 6-11 all wrong."""
    rng = np.random.Generator(np.random.PCG64(seed))
    order = rng.permutation(n)
    streak = np.zeros(n, dtype=np.int64)
    streak[:6], streak[6:12] = 1, -1
    return {
        "selector": "greso",
        "num_prompts": n,
        "rng_state": rng.bit_generator.state,
        "seed": seed,
        "hyperparameters": {"target_zero_variance": 0.25, "step": 0.01},
        "streak": streak,
        "last_rate": np.full(n, 0.5),
        "order": order,
        "position": 0,
        "p_easy": 0.47,
        "p_hard": 0.52,
    }


@pytest.mark.parametrize("how", ["from_state_dict", "load_state_dict"])
def test_an_old_greso_state_continues_as_it_would_have(how):
    n = 24
    state = old_greso_state(n, 8)
    if how == "from_state_dict":
        selector = GRESOSelector.from_state_dict(state)
    else:
        selector = GRESOSelector(n, seed=1)
        selector.load_state_dict(state)
    assert (selector.adapt_after_epochs, selector.epoch, selector._rules) == (0, 0, 0)
    reference = ScalarGRESO(n, generator(state["rng_state"]), state["order"], legacy=True)
    reference.streak, reference.p_easy, reference.p_hard = state["streak"].tolist(), 0.47, 0.52
    outcomes = np.random.default_rng(4)
    pending = []
    for step in range(40):
        exclude = pending if step % 2 else []
        batch = selector.select(12, exclude=exclude)
        assert batch.tolist() == reference.select(12, exclude)
        # the first batch ties (1 all correct, 2 all wrong): the old rule holds p there, in the first epoch too
        s = [4, 0, 0] + [2] * 9 if step == 0 else outcomes.binomial(4, 0.5, 12).tolist()
        selector.update(batch, s, [4] * 12)
        reference.update(batch.tolist(), s, [4] * 12)
        assert (selector.p_easy, selector.p_hard) == (reference.p_easy, reference.p_hard)
        if step == 0:
            assert (selector.p_easy, selector.p_hard) == (0.47, 0.52)
        pending = batch.tolist()
    saved = selector.state_dict()
    assert saved["rules"] == 0 and saved["hyperparameters"]["adapt_after_epochs"] == 0
    restored = GRESOSelector.from_state_dict(saved)
    np.testing.assert_array_equal(restored.select(12), selector.select(12))


def test_a_corrupted_greso_or_mopps_state_changes_nothing():
    greso = GRESOSelector(10, seed=0)
    for key, value in (("rules", 7), ("epoch", -1), ("hyperparameters", {"step": 0.01, "other": 1})):
        with pytest.raises(ValueError, match="corrupted"):
            greso.load_state_dict({**GRESOSelector(10, seed=3).state_dict(), key: value})
    with pytest.raises(ValueError, match="adapt_after_epochs"):
        bad = GRESOSelector(10, seed=3).state_dict()
        greso.load_state_dict({**bad, "hyperparameters": {**bad["hyperparameters"], "adapt_after_epochs": -2}})
    assert greso.state_dict()["rng_state"] == GRESOSelector(10, seed=0).state_dict()["rng_state"]
    mopps = MoPPSSelector(10, seed=0)
    bad = MoPPSSelector(10, seed=3).state_dict()
    for corrupt in ({**bad, "order": np.zeros(10, dtype=np.int64)}, {**bad, "hyperparameters": {"pool": "x"}}):
        with pytest.raises(ValueError):
            mopps.load_state_dict(corrupt)
    np.testing.assert_array_equal(mopps.state_dict()["order"], MoPPSSelector(10, seed=0).state_dict()["order"])
