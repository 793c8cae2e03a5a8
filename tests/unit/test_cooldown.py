"""The cooldown (`ExperimentalConfig(cooldown=...)`, `experimental.Cooldown`): which prompts it keeps out, by hand; the
least recent let back first when the pool runs short; a selector with it never draws a prompt again within its window
over many rounds, and its state file continues the run bit for bit."""

import numpy as np
import pytest

from trl_kgps.selectors.experimental import Cooldown, ExperimentalConfig, ExperimentalSelector


NONE = np.empty(0, dtype=np.int64)


def test_the_prompts_of_the_last_c_rounds_are_kept_out_by_hand():
    cooldown = Cooldown(8, 0.5)  # c = round(0.5 * 8 / 2) = 2 rounds for batches of 2
    assert cooldown.excluded(2, NONE).tolist() == []
    for batch, kept_out in [([0, 1], [0, 1]), ([2, 3], [0, 1, 2, 3]), ([4, 5], [2, 3, 4, 5]), ([6, 7], [4, 5, 6, 7])]:
        cooldown.drawn(np.array(batch))
        assert cooldown.excluded(2, NONE).tolist() == kept_out
    # the trainer's own exclusions are kept out as well, and the union is sorted and unique
    assert cooldown.excluded(2, np.array([0, 6])).tolist() == [0, 4, 5, 6, 7]


def test_the_least_recent_are_let_back_first_when_fewer_than_a_batch_would_be_left():
    cooldown = Cooldown(6, 0.5)  # c = round(0.5 * 6 / 2) = 2 rounds: 4 prompts kept out, 2 left
    cooldown.drawn(np.array([0, 1]))
    cooldown.drawn(np.array([2, 3]))
    assert cooldown.excluded(2, NONE).tolist() == [0, 1, 2, 3]
    # with prompt 5 excluded by the trainer only 3 more may be kept out: one of 0 and 1, drawn first, comes back
    kept_out = cooldown.excluded(2, np.array([5]))
    assert kept_out.size == 4 and {2, 3, 5} <= set(kept_out.tolist()) and len({0, 1} & set(kept_out.tolist())) == 1


def test_a_selector_with_a_cooldown_never_draws_a_prompt_again_within_its_window():
    N, B, share = 40, 4, 0.25  # c = round(0.25 * 40 / 4) = 2 rounds
    selector = ExperimentalSelector(N, ExperimentalConfig(cooldown=share), seed=0, features={"level": [0, 1] * 20})
    rng = np.random.default_rng(0)
    last = np.full(N, -100)
    gaps = []
    for round_ in range(300):
        batch = selector.select(B)
        gaps.extend((round_ - last[batch]).tolist())
        last[batch] = round_
        selector.predict(0.1)
        selector.update(batch, rng.binomial(8, 0.3, B), np.full(B, 8))
    assert min(gaps) == 3  # never within the 2 rounds after a draw, and back as soon as allowed
    assert len(set(np.flatnonzero(last >= 0).tolist())) == N


def test_the_state_file_continues_the_cooldown(tmp_path):
    from trl_kgps.engine import state_file

    selector = ExperimentalSelector(30, ExperimentalConfig(cooldown=0.5), seed=0, features={"level": [0, 1] * 15})
    rng = np.random.default_rng(0)
    for _ in range(5):
        batch = selector.select(4)
        selector.predict(0.1)
        selector.update(batch, rng.binomial(8, 0.3, 4), np.full(4, 8))
    state_file.save(str(tmp_path / "state.npz"), *state_file.pack_selector(selector.state_dict()))
    arrays, meta = state_file.load(str(tmp_path / "state.npz"))
    restored = ExperimentalSelector.from_state_dict(state_file.unpack_selector(arrays, {"selector": meta}))
    np.testing.assert_array_equal(restored._rule.cooldown.last, selector._rule.cooldown.last)
    for _ in range(6):
        np.testing.assert_array_equal(restored.select(4), selector.select(4))


def test_a_state_whose_rounds_are_in_the_future_is_refused():
    selector = ExperimentalSelector(10, ExperimentalConfig(cooldown=0.5), seed=0)
    selector.select(2)
    state = selector.state_dict()
    state["cooldown_last"][0] = 99
    with pytest.raises(ValueError, match="cooldown_last"):
        type(selector).from_state_dict(state)


@pytest.mark.parametrize("value", [-0.1, 0.6])
def test_a_cooldown_outside_zero_to_a_half_is_refused(value):
    with pytest.raises(ValueError, match=rf"cooldown must be a number in \[0, 0.5\], got {value}"):
        ExperimentalConfig(cooldown=value)
