"""The dealt draw (`ExperimentalConfig(dealt=True)`, `experimental.deal`): a stride scheduler's shares by hand, its
epoch walk under equal weights, its long-run counts against the weights (the selector's deal and its state file are in
test_shared.py, beside the other rule variants)."""

import numpy as np
import pytest

from trl_kgps.selectors.experimental import ExperimentalConfig, batch_shares, deal


NONE = np.empty(0, dtype=np.int64)


def test_equal_weights_deal_an_epoch_walk_in_the_order_of_the_starting_credits():
    credit = np.array([0.3, 0.9, 0.1, 0.7, 0.5, 0.2])  # order by credit: 1, 3, 4, 0, 5, 2
    rounds = [deal(credit, np.ones(6), 2, NONE).tolist() for _ in range(6)]
    assert rounds == [[1, 3], [4, 0], [5, 2]] * 2


def test_the_prompt_due_soonest_is_dealt_not_the_one_holding_most():
    # shares 0.001 / 2.001 and 1 / 2.001 (twice): after accruing, prompt 0 holds 0.9905 but is due in
    # (1 - 0.9905) / 0.0005 = 19 rounds; prompt 2 holds 0.7998 and is due in a quarter of one
    credit = np.array([0.99, 0.0, 0.3])
    assert deal(credit, np.array([0.001, 1.0, 1.0]), 1, NONE).tolist() == [2]
    np.testing.assert_allclose(credit, np.array([0.99, 0.0, 0.3 - 1.0]) + np.array([0.001, 1.0, 1.0]) / 2.001)


def test_batch_shares_cap_a_prompt_at_one_place_and_share_the_rest_by_weight():
    # B = 2 of weights 8, 1, 1: 8 alone would take 1.6 places; it takes 1, the other two share the other place.
    np.testing.assert_allclose(batch_shares(np.array([8.0, 1.0, 1.0]), 2), [1.0, 0.5, 0.5])
    # by hand: the two largest take a place each, lambda = 1 / 3 shares the third over weights 2 and 1
    np.testing.assert_allclose(batch_shares(np.array([9.0, 6.0, 2.0, 1.0]), 3), [1.0, 1.0, 2 / 3, 1 / 3])
    np.testing.assert_allclose(batch_shares(np.array([1.0, 3.0]), 1), [0.25, 0.75])  # no cap: B w / sum w
    # fewer positive weights than places: those take one each, the others share what is left
    np.testing.assert_allclose(batch_shares(np.array([5.0, 0.0, 0.0, 0.0]), 2), [1.0, 1 / 3, 1 / 3, 1 / 3])


def test_over_many_rounds_each_prompt_is_dealt_its_share_and_the_credits_stay_bounded():
    rng = np.random.default_rng(0)
    N, B, rounds = 40, 4, 2000
    weight = rng.gamma(0.5, size=N)
    credit, counts = rng.random(N), np.zeros(N)
    start = credit.sum()
    for _ in range(rounds):
        counts[deal(credit, weight, B, NONE)] += 1
    expected = rounds * batch_shares(weight, B)
    # chosen = accrued + starting credit - final credit, so the gap is the credit's change, within 2 here
    assert np.abs(counts - expected).max() < 2
    assert credit.sum() == pytest.approx(start)  # B accrued and B paid every round
    # a draw in proportion would miss by sqrt(rounds * share) ~ 10 for the largest shares
    assert np.abs(counts - expected).max() < 0.2 * np.sqrt(expected.max())


def test_an_excluded_prompt_waits_and_keeps_its_credit():
    credit = np.array([0.9, 0.5, 0.1])
    assert deal(credit, np.ones(3), 1, np.array([0])).tolist() == [1]
    np.testing.assert_allclose(credit, [0.9 + 1 / 3, 0.5 + 1 / 3 - 1, 0.1 + 1 / 3])
    assert deal(credit, np.ones(3), 1, NONE).tolist() == [0]


@pytest.mark.parametrize("fields", [{"selection": "top"}, {"candidates": 16.0}])
def test_dealt_is_refused_with_a_draw_it_does_not_deal(fields):
    with pytest.raises(ValueError, match="dealt=True deals the whole pool"):
        ExperimentalConfig(dealt=True, **fields)
