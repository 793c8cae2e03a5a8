"""The CPU benchmark's task: disjoint splits, even levels, and a warm start right at each level's stated rate."""

import numpy as np
import pytest

from trl_kgps.tasks.sharpening import LEVELS, WARM_START_ACCURACY, WRONG_ANSWER_OFFSETS, make_splits, wrong_answer


@pytest.fixture(scope="module")
def splits():
    return make_splits(400, 600, 20_000, seed=3)


def _sum(prompt: str) -> int:
    return sum(int(operand) for operand in prompt[:-1].split("+"))


def test_no_held_out_prompt_is_in_the_pool_or_the_warm_start(splits):
    train, heldout, warm = splits
    assert len(set(train["prompt"])) == 400 and len(set(heldout["prompt"])) == 600
    assert not set(heldout["prompt"]) & (set(train["prompt"]) | set(warm["prompt"]))
    assert not set(train["prompt"]) & set(warm["prompt"])


def test_pool_and_held_out_hold_every_level_evenly_with_right_answers(splits):
    train, heldout, _ = splits
    for dataset in (train, heldout):
        counts = np.bincount(dataset["level"], minlength=5)[1:]
        assert counts.sum() == len(dataset) and counts.min() > 0.2 * len(dataset)
        for prompt, answer, level in zip(dataset["prompt"], dataset["answer"], dataset["level"]):
            assert [len(o) for o in prompt[:-1].split("+")] == list(LEVELS[level])
            assert answer == str(_sum(prompt))


def test_warm_start_is_right_at_each_levels_rate_and_never_shows_level_4(splits):
    _, _, warm = splits
    levels = np.array(warm["level"])
    right = np.array([answer == str(_sum(prompt)) for prompt, answer in zip(warm["prompt"], warm["answer"])])
    assert set(levels.tolist()) == set(WARM_START_ACCURACY)
    for level, rate in WARM_START_ACCURACY.items():
        shown = levels == level
        assert shown.mean() == pytest.approx(1 / 3, abs=0.02)
        # 4 binomial standard deviations of ~6,700 draws
        assert right[shown].mean() == pytest.approx(rate, abs=4 * np.sqrt(rate * (1 - rate) / shown.sum()) + 1e-9)
    offsets = {int(a) - _sum(p) for p, a, ok in zip(warm["prompt"], warm["answer"], right) if not ok}
    assert offsets <= {abs(o) for o in WRONG_ANSWER_OFFSETS} | set(WRONG_ANSWER_OFFSETS)


def test_wrong_answers_are_never_negative_nor_right():
    rng = np.random.default_rng(0)
    for answer in ("0", "1", "9", "10", "45"):
        values = {int(wrong_answer(answer, rng)) for _ in range(200)}
        assert min(values) >= 0 and int(answer) not in values


def test_splits_are_seeded_and_refuse_requests_they_cannot_serve():
    a, b = make_splits(20, 20, 50, seed=1), make_splits(20, 20, 50, seed=1)
    assert a[0]["prompt"] == b[0]["prompt"] and a[2] == b[2]
    assert make_splits(20, 20, 50, seed=2)[0]["prompt"] != a[0]["prompt"]
    with pytest.raises(ValueError, match="num_eval=0"):
        make_splits(10, 0, 10)
    with pytest.raises(ValueError, match="smallest level"):
        make_splits(1500, 1000, 10)
