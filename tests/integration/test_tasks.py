"""
The tiny arithmetic policy: its tokenizer, its warm start, the success-rate estimator against a plain loop, and the
exact answer probability against a token-by-token product and against sampled success rates.
"""

import numpy as np
import pytest
import torch

from trl_kgps.tasks import arithmetic, sharpening, tiny
from trl_kgps.tasks.evaluation import answer_probabilities, success_rates


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


@pytest.fixture(scope="module")
def half_trained(tokenizer):
    """A policy warmed up briefly on the benchmark's noisy sums: its answer probabilities spread over (0, 1)."""
    train, _, warm = sharpening.make_splits(12, 4, 3000, seed=0)
    model = tiny.build_model(tokenizer, seed=0)
    tiny.warm_start(model, tokenizer, warm["prompt"], warm["answer"], steps=300)
    return model, train


def test_answer_probability_is_the_product_of_next_token_probabilities_unpadded(tokenizer, half_trained):
    model, train = half_trained
    probabilities = answer_probabilities(model, tokenizer, train["prompt"], train["answer"], batch_size=5)
    assert np.count_nonzero((probabilities > 0.05) & (probabilities < 0.95)) >= 4  # spread: padding could matter
    for prompt, answer, probability in zip(train["prompt"], train["answer"], probabilities):
        # The oracle: one prompt at a time, no padding, one forward pass per token, in float64.
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        product = 1.0
        for token in tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]:
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
            product *= torch.softmax(logits, dim=-1)[token].item()
            ids.append(token)
        assert probability == pytest.approx(product, rel=1e-4)


@pytest.mark.slow
def test_answer_probability_is_the_sampled_success_rate(tokenizer, half_trained):
    model, train = half_trained
    everywhere = answer_probabilities(model, tokenizer, train["prompt"], train["answer"])
    middle = np.flatnonzero((everywhere > 0.05) & (everywhere < 0.95))[:4]
    prompts, answers = [train["prompt"][i] for i in middle], [train["answer"][i] for i in middle]
    exact = everywhere[middle]
    sampled = success_rates(
        model, tokenizer, prompts, arithmetic.arithmetic_reward, {"answer": answers}, samples=1500, max_new_tokens=4
    )
    np.testing.assert_allclose(sampled, exact, atol=4 * np.sqrt(0.25 / 1500))  # 4 binomial standard deviations
