"""The tiny arithmetic policy: its tokenizer, its warm start, and the success-rate estimator against a plain loop."""

import numpy as np
import pytest
import torch

from trl_kgps.tasks import arithmetic, tiny
from trl_kgps.tasks.evaluation import success_rates


@pytest.fixture(scope="module")
def tokenizer():
    return tiny.build_tokenizer()


def test_tokenizer_is_one_token_per_character_and_decodes_back(tokenizer):
    text = "47+38=85"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.decode(ids + [tokenizer.eos_token_id], skip_special_tokens=True) == text


@pytest.mark.slow
def test_warm_start_teaches_the_one_digit_sums(tokenizer):
    problems = arithmetic.make_problems(100, seed=0, levels=(1,))
    model = tiny.build_model(tokenizer, seed=0)
    columns = {"answer": problems["answer"]}
    greedy = dict(temperature=None, max_new_tokens=4)
    before = success_rates(model, tokenizer, problems["prompt"], arithmetic.arithmetic_reward, columns, **greedy)
    losses = tiny.warm_start(model, tokenizer, problems["prompt"], problems["answer"], steps=250)
    after = success_rates(model, tokenizer, problems["prompt"], arithmetic.arithmetic_reward, columns, **greedy)
    assert before.mean() < 0.2 and after.mean() > 0.9
    assert np.mean(losses[-10:]) < 0.2 * np.mean(losses[:10])


def test_success_rates_equal_a_plain_generate_loop_and_leave_the_rng_alone(tokenizer):
    problems = arithmetic.make_problems(12, seed=5)
    model = tiny.build_model(tokenizer, seed=1)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    rates = success_rates(
        model, tokenizer, problems["prompt"], arithmetic.arithmetic_reward, {"answer": problems["answer"]},
        samples=3, max_new_tokens=4, batch_size=12, seed=9,
    )  # fmt: skip
    assert torch.equal(torch.get_rng_state(), state)

    # The oracle: the first generate() call by hand (batch_size 12 / 3 samples = 4 prompts), same seed, judged apart.
    torch.manual_seed(9)
    encoded = tokenizer(problems["prompt"][:4], return_tensors="pt", padding=True, add_special_tokens=False)
    output = model.generate(
        **encoded, do_sample=True, temperature=1.0, top_k=None, top_p=None, num_return_sequences=3, max_new_tokens=4
    )
    texts = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
    expected = [a for a in problems["answer"][:4] for _ in range(3)]
    oracle = np.array([t.split()[:1] == [e] for t, e in zip(texts, expected)]).reshape(4, 3).mean(axis=1)
    np.testing.assert_array_equal(rates[:4], oracle)


def test_success_rates_count_a_none_reward_as_a_failure_and_refuse_ragged_columns(tokenizer):
    model = tiny.build_model(tokenizer, seed=0)

    def always(completions, **kwargs):
        return [1.0, None] * (len(completions) // 2)

    rates = success_rates(model, tokenizer, ["1+1="] * 3, always, {}, samples=2, max_new_tokens=2)
    np.testing.assert_array_equal(rates, [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="one value per prompt"):
        success_rates(model, tokenizer, ["1+1="] * 3, always, {"answer": ["2"]})
