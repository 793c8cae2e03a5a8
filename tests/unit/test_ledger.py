"""
The rounds without a trainer: what the engine chooses, what its ledger keeps pending, what a score does, the
ledger's state.
"""

import numpy as np
import pytest

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.engine.engine import SelectionEngine
from trl_kgps.engine.ledger import BatchLedger


def rounds(num_prompts=12, batch_size=3, warmup_batches=0, config=None, seed=0):
    selector = KGPSSelector(num_prompts, config or KGPSConfig(), seed=seed)
    return SelectionEngine(selector, batch_size, warmup_batches, seed)


def observe(r, batch, successes, trials):
    """The engine's record of the scored batch (`Observed`), or `None` for the last batch scored again."""
    return r.observe(batch, np.asarray(successes), np.asarray(trials))[0]


def test_the_warmup_is_a_seeded_permutation_per_epoch_then_the_selector_excludes_pending_prompts():
    r = rounds(num_prompts=7, batch_size=3, warmup_batches=4)
    warmup = [r.choose() for _ in range(4)]  # two epochs of two batches; the seventh prompt is each epoch's tail
    for epoch in (warmup[:2], warmup[2:]):
        assert len(set(np.concatenate(epoch).tolist())) == 6
    first = np.random.default_rng([0, 0]).permutation(7)
    np.testing.assert_array_equal(np.concatenate(warmup[:2]), first[:6])
    pending = r.ledger.pending
    assert all(p.select_seconds is None for p in pending) and [p.lag for p in pending] == [0, 1, 2, 3]
    for batch in warmup:
        observe(r, batch, [1, 1, 1], [2, 2, 2])
    a = r.choose()
    b = r.choose()  # chosen while `a` is pending
    assert not set(a.tolist()) & set(b.tolist())
    assert r.ledger.pending[0].select_seconds is not None and r.ledger.pending[1].lag == 1


def test_a_score_during_the_warmup_initialises_first_observations_and_updates_the_others():
    r = rounds(num_prompts=6, batch_size=3, warmup_batches=3)  # epochs of two batches: the third repeats prompts
    reference = KGPSSelector(6, KGPSConfig(), seed=0)
    batches = [r.choose() for _ in range(3)]
    outcomes = ([0, 1, 2], [2, 1, 0], [1, 1, 2])
    for batch, s in zip(batches[:2], outcomes):
        observe(r, batch, s, [2, 2, 2])
        reference.initialize(batch, s, [2, 2, 2])
        assert r.predict(0.5) == {"kgps/delta_norm": 0.5}, "no process noise during the warmup"
    np.testing.assert_array_equal(r.selector.mean, reference.mean)
    np.testing.assert_array_equal(r.selector.variance, reference.variance)
    observe(r, batches[2], outcomes[2], [2, 2, 2])  # every prompt observed before: updates
    reference.update(batches[2], outcomes[2], [2, 2, 2])
    np.testing.assert_allclose(r.selector.mean, reference.mean)
    np.testing.assert_allclose(r.selector.variance, reference.variance)
    assert not r.ledger.in_warmup and r.predict(0.5)["kgps/process_noise"] > 0


def test_scores_attribute_outcomes_by_index_whatever_the_order_of_pending_batches():
    r = rounds()
    a, b, c = r.choose(), r.choose(), r.choose()
    scored = observe(r, b, [1, 0, 2], [2, 2, 2])  # the trainer skipped `a` (a resume without KGPS state)
    assert scored.skipped == 1 and np.array_equal(scored.indices, b)
    assert [p.indices.tolist() for p in r.ledger.pending] == [c.tolist()]
    assert r.observe(b, [1, 0, 2], [2, 2, 2]) == (None, {}), (
        "the last batch scored again (TRL regenerates it) is ignored"
    )
    assert r.ledger.batches_scored == 1
    before = r.selector.state_dict()
    with pytest.raises(ValueError, match="none of the generation batches KGPS chose"):
        observe(r, a, [1, 1, 1], [2, 2, 2])
    after = r.selector.state_dict()
    assert all(np.array_equal(before[key], after[key]) for key in before if isinstance(before[key], np.ndarray))
    assert len(r.ledger.pending) == 1 and r.ledger.batches_scored == 1


def test_observed_and_coverage_count_prompts_with_a_scored_rollout_only():
    r = rounds(num_prompts=6, batch_size=3)
    batch = r.choose()
    observe(r, batch, [0, 0, 1], [0, 2, 2])
    ledger = r.ledger
    assert ledger.observed.sum() == 2 and not ledger.observed[batch[0]] and ledger.coverage == pytest.approx(2 / 6)
    assert ledger.times_selected.sum() == 3


def test_the_state_round_trips_and_a_bad_one_is_refused_before_anything_changes():
    r = rounds(seed=4)
    for _ in range(3):
        r.choose()
    observe(r, r.ledger.pending[0].indices, [1, 2, 0], [2, 2, 2])
    state = r.ledger.state_dict()
    restored = rounds(seed=4).ledger
    restored.load_state_dict(state)
    for key, value in restored.state_dict().items():
        np.testing.assert_array_equal(value, state[key])
    assert [p.predicted.tolist() for p in restored.pending] == [p.predicted.tolist() for p in r.ledger.pending]

    fresh = rounds(seed=4).ledger
    for key, bad in (
        ("pending", np.zeros((1, 4), dtype=np.int64)),
        ("predictions", np.zeros((3, 3))),
        ("times_selected", state["times_selected"] + 1),
        ("observed", np.zeros(5, dtype=bool)),
        ("last_scored", np.array([0, 1, 99])),
        ("pending_lags", np.array([0])),
        ("pending_lags", np.array([-1, 0])),
        ("pending_select_seconds", np.array([0.1, -1.0])),
        ("pending_select_seconds", np.array([0, 1])),
        ("recent_batches", np.array([[0, 1, 12]])),
        ("recent_batches", np.array([[0, 1, 1]])),
        ("recent_batches", np.tile([0, 1, 2], (5, 1))),  # more than an epoch's worth (4 batches)
    ):
        with pytest.raises(ValueError, match=key):
            fresh.load_state_dict({**state, key: bad})
        assert fresh.batches_chosen == 0 and not fresh.pending and fresh.last_scored is None
        assert not fresh.recent.batches and fresh.recent.unique_prompts == 0


def scored_rounds(r, schedule, outcomes):
    """Plays `schedule` on `r`: "c" chooses a batch, "s" scores the oldest pending one; the scored batches."""
    scored = []
    for step in schedule:
        if step == "c":
            r.choose()
        else:
            scored.append(observe(r, r.ledger.pending[0].indices, *outcomes[len(scored) % len(outcomes)]))
    return scored


def test_the_locking_metrics_and_pending_batches_continue_after_a_round_trip_as_without_one():
    outcomes = [([0, 1, 2], [2, 2, 2]), ([2, 0, 1], [2, 2, 2]), ([1, 1, 0], [2, 1, 2])]
    # Lag 1 through the warmup's two batches and after, then lag 0 (a batch may repeat the last), then lag 1 again.
    before, after = "ccscscs", "scscscsccscscs"
    straight, interrupted, resumed = (rounds(num_prompts=9, warmup_batches=2, seed=3) for _ in range(3))
    scored_rounds(straight, before, outcomes)
    scored_rounds(interrupted, before, outcomes)
    saved = [(p.indices.tolist(), p.lag, p.select_seconds) for p in interrupted.ledger.pending]
    assert [lag for _, lag, _ in saved] == [1] and saved[0][2] is not None
    state, selector_state = interrupted.ledger.state_dict(), interrupted.selector.state_dict()

    resumed.ledger.load_state_dict(state)
    resumed.selector.load_state_dict(selector_state)
    assert [(p.indices.tolist(), p.lag, p.select_seconds) for p in resumed.ledger.pending] == saved

    def locking(scored):
        return [(s.indices.tolist(), s.chosen.lag, s.repeats, s.unique_prompts) for s in scored]

    expected = locking(scored_rounds(straight, after, outcomes))
    assert locking(scored_rounds(resumed, after, outcomes)) == expected
    assert {lag for _, lag, _, _ in expected} == {0, 1} and 0 < max(r for _, _, r, _ in expected) < 1
    assert len({u for _, _, _, u in expected}) > 1, "the window's distinct prompts never changed"

    old = {key: value for key, value in state.items() if not key.startswith(("pending_", "recent_"))}
    resumed.ledger.load_state_dict(old)  # as trl-kgps 0.1 and 0.2 saved it: no lags, selection times or window
    assert [(p.lag, p.select_seconds) for p in resumed.ledger.pending] == [(0, None)]
    assert not resumed.ledger.recent.batches


def test_a_batch_larger_than_the_dataset_is_refused():
    with pytest.raises(
        ValueError,
        match=r"needs 8 distinct prompts and the dataset has 4: use",  # the trainer's formula: its adapter
    ):
        rounds(num_prompts=4, batch_size=8)


def test_a_scored_batchs_metrics_by_hand():
    from scipy.stats import spearmanr

    from trl_kgps.engine.metrics import batch_metrics

    r = rounds(num_prompts=8, batch_size=4)
    first = r.choose()
    batch = r.choose()
    observe(r, first, [0, 0, 0, 0], [2, 2, 2, 2])
    r.ledger.pending[0].predicted = np.array([0.2, 0.4, 0.6, 0.3])  # as if the beliefs had spread
    scored = observe(r, batch, [0, 1, 2, 3], [0, 2, 4, 4])  # the first prompt unscored
    metrics = batch_metrics(scored, r.ledger.coverage, nis=1.5)
    predicted, empirical = scored.predicted[1:], np.array([0.5, 0.5, 0.75])
    assert metrics["kgps/lag"] == 1 and metrics["kgps/repeats"] == 0.0 and metrics["kgps/unique_prompts"] == 8
    assert metrics["kgps/coverage"] == 7 / 8 and metrics["kgps/nis"] == 1.5
    assert metrics["kgps/informative"] == 1.0 and metrics["kgps/select_ms"] >= 0
    assert metrics["kgps/predicted_success"] == pytest.approx(scored.predicted.mean())
    assert metrics["kgps/mae"] == pytest.approx(np.abs(predicted - empirical).mean())
    assert metrics["kgps/spearman"] == pytest.approx(spearmanr(predicted, empirical).statistic)


def test_a_process_noise_past_the_largest_logit_variance_is_refused_before_any_belief_changes():
    # gamma at its bound, 1e12 (fixed: its calibration would move it), and a norm of 2: Q = 2e12. Before, it was
    # added, and a few such steps overflowed the float32 variances to NaN, saved in every checkpoint without a word and
    # refused as corrupted on resume.
    selector = KGPSSelector(12, KGPSConfig(gamma=1e12, process_noise_adaptation=0.0), seed=0)
    engine = SelectionEngine(selector, 3)
    batch = engine.choose()
    engine.observe(batch, np.array([1, 2, 3]), np.array([4, 4, 4]))
    before = selector.state_dict()
    with pytest.raises(ValueError, match=r"Q = 2e\+12 for an update norm of 2, is above 1e\+12.*Lower gamma"):
        engine.predict(2.0)
    for name, value in before.items():
        np.testing.assert_equal(selector.state_dict()[name], value, err_msg=name)
    assert engine.predict(1.0)["kgps/process_noise"] == 1e12  # at the bound: applied
    assert np.isfinite(selector.variance).all()


def test_the_ledger_records_a_round_without_a_selector():
    # The engine alone holds the selector; the ledger keeps what was chosen, awaited and scored.
    ledger = BatchLedger(6, 3, warmup_batches=1, seed=2)
    assert not hasattr(ledger, "selector")
    batch = np.asarray(ledger.warmup_batch(), dtype=np.int64)
    np.testing.assert_array_equal(batch, np.random.default_rng([2, 0]).permutation(6)[:3])
    chosen = ledger.add_chosen(batch, np.full(3, 0.5), None)
    assert ledger.warmup_batch() is None and list(ledger.pending) == [chosen] and ledger.times_selected.sum() == 3
    assert ledger.take_scored(batch) == (chosen, 0) and not ledger.pending
    scored = ledger.add_scored(chosen, batch, np.array([1, 0, 2]), np.array([2, 0, 2]), warmup=True, skipped=0)
    assert scored.warmup and ledger.observed_count == 2 and not ledger.in_warmup
    assert ledger.take_scored(batch) is None, "the last batch scored, scored again"
