"""How often a policy solves each prompt: sampled completions judged by a TRL reward function."""

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch


@torch.no_grad()
def success_rates(
    model,
    tokenizer,
    prompts: Sequence[Any],
    reward_func: Callable[..., list[float | None]],
    columns: dict[str, Sequence[Any]],
    samples: int = 1,
    temperature: float | None = 1.0,
    max_new_tokens: int = 6,
    batch_size: int = 256,
    seed: int = 0,
) -> np.ndarray:
    """
    Each prompt's share of successful completions: `samples` draws at `temperature` (or one greedy completion when
    `temperature` is None), each a success when `reward_func` gives it `>= 0.5`, the callback's default rule.

    Args:
        prompts (`Sequence`): plain-text prompts, or conversations (lists of messages, rendered with the chat
            template).
        reward_func (`Callable`): a TRL reward function, `reward_func(completions, **columns) -> list[float]`.
        columns (`dict[str, Sequence]`): the dataset columns the reward reads, one value per prompt (e.g.
            `{"answer": dataset["answer"]}`).

    Returns:
        `np.ndarray` of shape `(len(prompts),)`, in `[0, 1]`.
    """
    if samples < 1 or batch_size < 1 or any(len(values) != len(prompts) for values in columns.values()):
        raise ValueError(
            f"success_rates(samples={samples}, batch_size={batch_size}) on {len(prompts)} prompts with columns "
            f"{ {name: len(values) for name, values in columns.items()} }: samples and batch_size must be >= 1 and "
            "every column hold one value per prompt."
        )
    draws = 1 if temperature is None else samples
    per_call = max(1, batch_size // draws)  # prompts per generate() call
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    rates = np.empty(len(prompts))
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # leave the caller's RNG alone
        torch.manual_seed(seed)
        for start in range(0, len(prompts), per_call):
            chunk = slice(start, min(start + per_call, len(prompts)))
            texts = [_render(tokenizer, prompt) for prompt in prompts[chunk]]
            encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            output = model.generate(
                **encoded,
                do_sample=temperature is not None,
                temperature=temperature,
                top_k=None,
                top_p=None,
                num_return_sequences=draws,
                max_new_tokens=max_new_tokens,
            )
            completions = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
            repeated = {name: [v for v in values[chunk] for _ in range(draws)] for name, values in columns.items()}
            rewards = reward_func(completions, **repeated)
            success = np.array([r is not None and r >= 0.5 for r in rewards])  # a None reward is no success
            rates[chunk] = success.reshape(-1, draws).mean(axis=1)
    model.train(was_training)
    return rates


def _render(tokenizer, prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)


@torch.no_grad()
def answer_probabilities(
    model, tokenizer, prompts: Sequence[str], answers: Sequence[str], batch_size: int = 512
) -> np.ndarray:
    r"""
    The probability that sampling at temperature 1 from `model` completes each plain-text prompt with exactly its
    answer and then the end of sequence: \\(\prod_t \pi(y_t \mid x, y_{<t})\\) over the tokens of `answer + eos`,
    by one teacher-forced forward pass (no sampling, so no sampling noise).

    For a task whose reward accepts only that completion (the arithmetic tasks, whose character tokenizer has no
    whitespace), this is the prompt's success rate under GRPO's sampling (temperature 1, no top-k or top-p), up to
    completions that interleave special tokens (pad, unk) which decoding drops: a policy never trained to emit them
    practically never does. `tests/integration/test_tasks.py` checks it against sampled success rates.

    Returns:
        `np.ndarray` of shape `(len(prompts),)`, float64, in `[0, 1]`.
    """
    if len(prompts) != len(answers) or batch_size < 1:
        raise ValueError(
            f"answer_probabilities: {len(prompts)} prompts and {len(answers)} answers (batch_size={batch_size}): "
            "pass one answer per prompt and batch_size >= 1."
        )
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    probabilities = np.empty(len(prompts))
    for start in range(0, len(prompts), batch_size):
        chunk = slice(start, min(start + batch_size, len(prompts)))
        prompt_ids = tokenizer(list(prompts[chunk]), add_special_tokens=False)["input_ids"]
        targets = [answer + tokenizer.eos_token for answer in answers[chunk]]
        target_ids = tokenizer(targets, add_special_tokens=False)["input_ids"]
        # Left-padded prompt + target, as generate() sees them: e.g. "3+5=" + "8<eos>" -> <pad> 3 + 5 = 8 <eos>
        width = max(len(p) + len(t) for p, t in zip(prompt_ids, target_ids))
        input_ids = torch.full((len(prompt_ids), width), tokenizer.pad_token_id)
        attention_mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
        is_target = torch.zeros((len(prompt_ids), width), dtype=torch.bool)
        for row, (prompt, target) in enumerate(zip(prompt_ids, target_ids)):
            length = len(prompt) + len(target)
            input_ids[row, width - length :] = torch.tensor(prompt + target)
            attention_mask[row, width - length :] = 1
            is_target[row, width - len(target) :] = True
        position_ids = (attention_mask.cumsum(1) - 1).clamp(min=0)
        input_ids, attention_mask, position_ids = (t.to(device) for t in (input_ids, attention_mask, position_ids))
        logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits.float()
        # The token at position t is predicted by the logits at t - 1.
        log_probs = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:, None])[..., 0]
        total = (log_probs * is_target[:, 1:].to(device)).sum(dim=1)
        probabilities[chunk] = total.exp().cpu().numpy()
    model.train(was_training)
    return probabilities
