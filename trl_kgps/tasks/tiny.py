"""
Tiny models and tokenizers built here, with nothing downloaded — the one set that the demo, the benchmarks, the tests
and the example scripts' tests use — and a supervised warm start: a policy that learns arithmetic on a CPU in a
minute.
"""

import math
from collections.abc import Sequence

import numpy as np
import torch

from .arithmetic import ALPHABET


SPECIAL_TOKENS = ("<pad>", "<eos>", "<unk>")


def build_tokenizer(
    vocabulary: str | Sequence[str] = ALPHABET,
    *,
    split: str = "characters",
    special_tokens: Sequence[str] = (),
    chat_template: str | None = None,
    padding_side: str = "left",
):
    """
    A word-level `PreTrainedTokenizerFast` trained on nothing: one token per entry of `vocabulary` (in sorted order,
    after `<pad>`, `<eos>`, `<unk>` and `special_tokens`, which are split out wherever they appear).

    Args:
        vocabulary (`str` or `Sequence[str]`): the characters (`split="characters"`, e.g. the arithmetic alphabet)
            or words (`split="whitespace"`) it knows.
        split (`str`): `"characters"` (every character is a token; text decodes without spaces) or `"whitespace"`.
        special_tokens (`Sequence[str]`): more special tokens, e.g. `"<image>"` for a vision-language model.
        chat_template (`str`, *optional*): a Jinja chat template, for conversational datasets.
        padding_side (`str`): `"left"`, as generation wants, or `"right"`.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if split not in ("characters", "whitespace"):
        raise ValueError(f"split must be 'characters' or 'whitespace', got {split!r}.")
    special = list(SPECIAL_TOKENS) + list(special_tokens)
    vocab = {token: i for i, token in enumerate(special + sorted(set(vocabulary) - set(special)))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    if split == "characters":
        backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), "isolated")
        backend.decoder = decoders.Fuse()
    else:
        backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.add_special_tokens(special)
    pad, eos, unk = SPECIAL_TOKENS
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=pad,
        eos_token=eos,
        unk_token=unk,
        padding_side=padding_side,
        chat_template=chat_template,
        # without token_type_ids, which transformers 4 would add and Qwen2's generate rejects
        model_input_names=["input_ids", "attention_mask"],
    )


def qwen2_config(
    tokenizer,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    max_length: int = 64,
    **overrides,
):
    """
    The `Qwen2Config` of a small model for `tokenizer`: tied embeddings, an MLP twice as wide as the model, the
    tokenizer's pad and eos tokens; `overrides` are other `Qwen2Config` arguments.
    """
    from transformers import Qwen2Config

    arguments = dict(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_length,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return Qwen2Config(**{**arguments, **overrides})


def build_model(tokenizer, hidden_size: int = 64, num_layers: int = 2, max_length: int = 64, seed: int = 0, **config):
    """
    A small `Qwen2ForCausalLM` for `tokenizer`, initialised from `seed` (about 75k parameters by default with the
    arithmetic tokenizer), for sequences of up to `max_length` tokens; `config` goes to `qwen2_config`.
    """
    from transformers import GenerationConfig, Qwen2ForCausalLM

    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(qwen2_config(tokenizer, hidden_size, num_layers, max_length=max_length, **config))
    model.generation_config = GenerationConfig(
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None
    )
    if model.config.tie_word_embeddings:
        # The head is the embedding, so checkpoints do not hold it: told so, the Trainer re-ties it on resume instead
        # of warning "There were missing keys in the checkpoint model loaded: ['lm_head.weight']".
        model._keys_to_ignore_on_save = ["lm_head.weight"]
    return model


def save_weights(model, path) -> None:
    """Writes `model`'s weights to the safetensors file `path`, without the head that is tied to the embedding."""
    from safetensors.torch import save_file

    save_file({name: t.contiguous() for name, t in model.state_dict().items() if name != "lm_head.weight"}, str(path))


def load_weights(model, path) -> None:
    """Loads what `save_weights` wrote into `model` (built by `build_model`), and puts it in eval mode."""
    from safetensors.torch import load_file

    missing, unexpected = model.load_state_dict(load_file(path), strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:  # lm_head is tied to the embedding, so not in the file
        raise ValueError(f"{path} does not fit the model: missing {missing}, unexpected {unexpected}.")
    model.eval()


# The word-level setup the tests and benchmarks/bench_trl_overhead.py run GRPO on: prompts "p<i> a b".
WORDS = [f"p{i}" for i in range(64)] + ["a", "b", "c", "d", "e", "f", "g", "h"]


def word_tokenizer(words: Sequence[str] = WORDS):
    """A word-level tokenizer over `words`, padding on the right as TRL's own tests do."""
    return build_tokenizer(words, split="whitespace", padding_side="right")


def word_model(tokenizer, seed: int = 0):
    """
    A 2-layer Qwen2 of width 16 for `tokenizer` (6k parameters with `WORDS`). No pad token in its config, so the pad
    embedding trains like any other, as in the model that wrote tests/data/trl_kgps_0.1_run.
    """
    return build_model(
        tokenizer, hidden_size=16, num_heads=2, num_kv_heads=1, seed=seed, pad_token_id=None, eos_token_id=None
    )


def word_prompts(num_prompts: int):
    """A `datasets.Dataset` of `num_prompts` prompts "p<i> a b" with their number `i` in the column `idx`."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [f"p{i} a b" for i in range(num_prompts)], "idx": list(range(num_prompts))})


def grpo_config(output_dir, config_class=None, **overrides):
    """A `GRPOConfig` (or `config_class`, e.g. `RLOOConfig`) for a few CPU steps on `word_model`."""
    from trl import GRPOConfig

    kwargs = dict(
        output_dir=str(output_dir),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=4,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    return (config_class or GRPOConfig)(**{**kwargs, **overrides})


def warm_start(
    model,
    tokenizer,
    prompts: Sequence[str],
    answers: Sequence[str],
    steps: int,
    batch_size: int = 64,
    learning_rate: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """
    Supervised fine-tuning on `prompt + answer + eos` (loss on the answer and eos only), `steps` AdamW steps with a
    cosine schedule. Short on purpose: a partly trained policy whose success rates spread between 0 and 1 is what
    RL with prompt selection starts from.

    Returns:
        The loss of every step (nats per answer token).
    """
    if steps < 0 or batch_size < 1 or len(prompts) != len(answers) or not prompts:
        raise ValueError(
            f"warm_start(steps={steps}, batch_size={batch_size}) on {len(prompts)} prompts and {len(answers)} "
            "answers: steps must be >= 0, batch_size >= 1, and prompts and answers non-empty and equally long."
        )
    generator = np.random.default_rng(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    eos = tokenizer.eos_token
    losses = []
    model.train()
    for step in range(steps):
        rows = generator.integers(0, len(prompts), batch_size)
        prompt_ids = tokenizer([prompts[i] for i in rows], add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer([answers[i] + eos for i in rows], add_special_tokens=False)["input_ids"]
        input_ids, labels = _right_padded(prompt_ids, answer_ids, tokenizer.pad_token_id)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate * 0.5 * (1 + math.cos(math.pi * step / steps))
        loss = model(input_ids=input_ids, attention_mask=input_ids != tokenizer.pad_token_id, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    model.eval()
    return losses


def _right_padded(prompt_ids, answer_ids, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) + len(a) for p, a in zip(prompt_ids, answer_ids))
    input_ids = torch.full((len(prompt_ids), width), pad_id)
    labels = torch.full((len(prompt_ids), width), -100)
    for row, (prompt, answer) in enumerate(zip(prompt_ids, answer_ids)):
        input_ids[row, : len(prompt) + len(answer)] = torch.tensor(prompt + answer)
        labels[row, len(prompt) : len(prompt) + len(answer)] = torch.tensor(answer)
    return input_ids, labels
