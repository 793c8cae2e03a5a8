"""Builders for real TRL runs on a tiny model made from a config and a tokenizer trained here: no Hub access."""

import os

import numpy as np
import pytest


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def build_tokenizer(words):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<eos>", "<unk>"]
    vocab = {token: i for i, token in enumerate(special + sorted(set(words)))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def build_model(vocab_size, seed=0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config)


WORDS = [f"p{i}" for i in range(64)] + ["a", "b", "c", "d", "e", "f", "g", "h"]


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer(WORDS)


@pytest.fixture
def model(tokenizer):
    return build_model(len(tokenizer))


def prompt_dataset(num_prompts):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [f"p{i} a b" for i in range(num_prompts)], "idx": list(range(num_prompts))})


def grpo_args(tmp_path, **overrides):
    from trl import GRPOConfig

    kwargs = dict(
        output_dir=str(tmp_path),
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
    kwargs.update(overrides)
    return GRPOConfig(**kwargs)


class RewardLog:
    """A deterministic-per-seed 0/1 reward that records which dataset index got which reward."""

    __name__ = "logged_reward"

    def __init__(self, seed=0, events=None):
        self.rng = np.random.default_rng(seed)
        self.events = [] if events is None else events
        self.base = self.rng.uniform(0.1, 0.9, 1000)

    def __call__(self, prompts, completions, idx, **kwargs):
        rewards = [float(self.rng.uniform() < self.base[i]) for i in idx]
        self.events.append(("scored", list(idx), rewards))
        return rewards
