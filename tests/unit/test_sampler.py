"""KGPSRepeatSampler: TRL's RepeatSampler layout, a uniform warmup, then the selector, pending prompts kept out."""

import warnings

import numpy as np
import pytest
from trl.trainer.utils import RepeatSampler

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.sampler import KGPSRepeatSampler


def score_oldest(sampler, successes=(1, 0, 2), trials=(2, 2, 2)):
    """The trainer scored the oldest pending batch: its `Observed`."""
    return sampler.engine.observe(sampler.ledger.pending[0].indices, successes, trials)[0]


def blocks(indices, batch_size, mini, repeat):
    """Split a sampler's output into generation batches, checking the repetition layout on the way."""
    indices = np.asarray(indices)
    per_batch = batch_size * mini * repeat
    out = []
    for chunk in indices.reshape(-1, per_batch):
        first = chunk[: batch_size * mini]
        assert (chunk.reshape(repeat, -1) == first).all(), "each batch is repeated `repeat_count` times"
        groups = first.reshape(batch_size, mini)
        assert (groups == groups[:, :1]).all(), "each prompt is repeated `mini_repeat_count` times"
        out.append(groups[:, 0])
    return out


@pytest.mark.parametrize("num_prompts, batch_size, mini, repeat", [(7, 3, 2, 4), (12, 4, 4, 1), (10, 10, 1, 2)])
def test_layout_and_length_match_trls_repeat_sampler(num_prompts, batch_size, mini, repeat):
    ours = KGPSRepeatSampler(range(num_prompts), mini, batch_size, repeat)
    trls = RepeatSampler(range(num_prompts), mini, batch_size, repeat, seed=0)
    assert len(ours) == len(trls) == len(list(trls))
    assert len(list(ours)) == len(ours)


def test_warmup_is_a_permutation_then_the_selector_chooses_with_pending_excluded():
    selector = KGPSSelector(12, KGPSConfig(warmup_epochs=0), seed=3)
    sampler = KGPSRepeatSampler(range(12), mini_repeat_count=2, batch_size=3, selector=selector, warmup_epochs=1)
    warmup = blocks(list(sampler), 3, 2, 1)
    assert sorted(np.concatenate(warmup).tolist()) == list(range(12))
    assert len(sampler.ledger.pending) == 4
    for _ in range(4):
        score_oldest(sampler)
    iterator = iter(sampler)
    first = [next(iterator) for _ in range(6)]  # batch 1 chosen, not scored
    second = [next(iterator) for _ in range(6)]  # batch 2 chosen while batch 1 is pending
    assert not set(first) & set(second)
    assert sampler.ledger.batches_chosen == 6 and len(sampler.ledger.pending) == 2


def test_a_pool_too_small_for_the_exclusion_warns_once_and_selects_anyway():
    sampler = KGPSRepeatSampler(range(5), mini_repeat_count=1, batch_size=3, warmup_epochs=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        epochs = [list(sampler) for _ in range(3)]  # one batch an epoch, none scored: 3 then 6 prompts pending
    assert sum("await their rewards" in str(w.message) for w in caught) == 1
    assert all(len(set(batch)) == 3 for batch in epochs)


def test_state_round_trip_replays_the_epoch_so_far():
    def make():
        return KGPSRepeatSampler(
            range(9), 2, 3, selector=KGPSSelector(9, KGPSConfig(warmup_epochs=0)), warmup_epochs=0
        )

    original = make()
    iterator = iter(original)
    head = [next(iterator) for _ in range(12)]  # two batches chosen, the second one only started
    score_oldest(original)
    restored = make()
    restored.load_state_dict(original.state_dict())
    assert [b.indices.tolist() for b in restored.ledger.pending] == [
        b.indices.tolist() for b in original.ledger.pending
    ]
    replayed = list(restored)
    assert replayed[:12] == head, "the resumed epoch starts with the batches chosen before the checkpoint"
    assert restored.ledger.batches_chosen == 3


def test_a_waiting_batch_has_one_record_which_the_epoch_and_the_pending_batches_share():
    def make():
        return KGPSRepeatSampler(range(9), 2, 3, selector=KGPSSelector(9, KGPSConfig(), seed=2), warmup_epochs=0)

    sampler = make()
    iterator = iter(sampler)
    [next(iterator) for _ in range(12)]  # two batches chosen
    score_oldest(sampler)
    ledger = sampler.ledger
    assert len(ledger.epoch) == 2 and list(ledger.pending) == [ledger.epoch[1]]
    assert ledger.pending[0] is ledger.epoch[1], "one record, not a copy"
    # the sampler holds no batch of its own: only its layout, the engine and whether to replay
    assert not [name for name, value in vars(sampler).items() if isinstance(value, (list, np.ndarray))]
    restored = make()
    restored.load_state_dict(sampler.state_dict())
    assert restored.ledger.pending[0] is restored.ledger.epoch[1]
    np.testing.assert_array_equal(restored.ledger.epoch[0].indices, ledger.epoch[0].indices)


@pytest.mark.parametrize("shape", [(1, 4), (2, 3, 1)])
def test_a_state_for_another_batch_size_is_refused(shape):
    sampler = KGPSRepeatSampler(range(9), 2, 3)
    state = sampler.state_dict()
    state["pending"] = np.zeros(shape, dtype=np.int64)
    with pytest.raises(ValueError, match="saved for another dataset or batch size"):
        sampler.load_state_dict(state)


def test_a_dataset_smaller_than_a_batch_or_a_selector_of_another_size_is_refused():
    with pytest.raises(
        ValueError, match=r"needs 8 distinct prompts \(per_device_train_batch_size x .*\) and the dataset has 4: use"
    ):
        KGPSRepeatSampler(range(4), 2, 8)
    with pytest.raises(ValueError, match="tracks 5 prompts but the dataset has 9"):
        KGPSRepeatSampler(range(9), 2, 3, selector=KGPSSelector(5))


def test_times_selected_counts_every_batch_chosen_warmup_included_and_round_trips():
    def make():
        return KGPSRepeatSampler(range(7), 2, 3, selector=KGPSSelector(7, KGPSConfig(), seed=1), warmup_epochs=1)

    sampler = make()
    chosen = []
    for _ in range(3):  # a warmup epoch of two batches (the tail prompt dropped), then two epochs chosen by KGPS
        chosen += blocks(list(sampler), 3, 2, 1)
        while sampler.ledger.pending:
            score_oldest(sampler)
    assert sampler.ledger.times_selected.dtype == np.int32
    np.testing.assert_array_equal(sampler.ledger.times_selected, np.bincount(np.concatenate(chosen), minlength=7))
    assert sampler.ledger.times_selected.sum() == sampler.ledger.batches_chosen * 3 == 18

    restored = make()
    restored.load_state_dict(sampler.state_dict())
    np.testing.assert_array_equal(restored.ledger.times_selected, sampler.ledger.times_selected)
    state = sampler.state_dict()
    state["times_selected"][0] += 1  # one more slot than the batches chosen hold
    with pytest.raises(ValueError, match="does not count 6 batches of 3 prompts out of 7"):
        make().load_state_dict(state)
