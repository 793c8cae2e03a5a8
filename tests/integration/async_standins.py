"""
Stand-ins for the four things TRL's `AsyncGRPOTrainer` needs a GPU and a vLLM server for, so that the real trainer,
its real rollout worker (a spawned child process), its scoring, packing and staleness filter run on CPU:

- **vLLM generation** -> `StandInLoop._generate_one_turn`: the tiny model's own sampling (temperature 1, no top-k or
  top-p, TRL's settings), with the weights of the version the trainer last sent, and the raw log-probabilities;
- **NCCL weight transfer** -> `FileWeightTransfer`: every sync writes the weights to a file the child reads;
- **the FA3 "tree" attention kernel** -> `cpu_flash_attn_varlen_func`: the same variable-length causal attention,
  segment by segment with `scaled_dot_product_attention` (the trainer's log-probabilities then equal the generator's:
  the first step's importance ratio is exactly 1, which a test checks);
- **the peak-FLOPs probe**, which calls `torch.cuda.get_device_name` -> no MFU metric.

Everything here is importable by the worker's child process, which unpickles the loop class and the reward by
reference.
"""

import asyncio
import json
import multiprocessing
import os

import numpy as np
import torch
import torch.nn.functional as F
from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker, _AsyncRolloutLoop

from trl_kgps.tasks import tiny


WORDS = tiny.WORDS
WEIGHTS_DIR = "KGPS_STAND_IN_WEIGHTS"  # where FileWeightTransfer writes, for a StandInLoop that TRL builds


def cpu_flash_attn_varlen_func(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=None, causal=True, **kwargs
):
    """FA3's `flash_attn_varlen_func` for `tree_attention`: segment `i`'s queries attend its K/V path, causally
    aligned to the path's end. `q` `(Nq, H, D)`, `k`, `v` `(Nk, H_kv, D)`."""
    out = torch.empty_like(q)
    repeat = q.shape[1] // k.shape[1]
    for i in range(len(cu_seqlens_q) - 1):
        qs = q[cu_seqlens_q[i] : cu_seqlens_q[i + 1]].transpose(0, 1)
        ks = k[cu_seqlens_k[i] : cu_seqlens_k[i + 1]].transpose(0, 1).repeat_interleave(repeat, 0)
        vs = v[cu_seqlens_k[i] : cu_seqlens_k[i + 1]].transpose(0, 1).repeat_interleave(repeat, 0)
        mask = torch.ones(qs.shape[1], ks.shape[1], dtype=torch.bool).tril(diagonal=ks.shape[1] - qs.shape[1])
        attended = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask, scale=softmax_scale)
        out[cu_seqlens_q[i] : cu_seqlens_q[i + 1]] = attended.transpose(0, 1)
    return out


class _CPUFlashAttention:
    flash_attn_varlen_func = staticmethod(cpu_flash_attn_varlen_func)


def install(monkeypatch, weights_dir=None) -> None:
    """
    Installs the attention and FLOPs stand-ins, and lets TRL's worker be built without vLLM installed. With
    `weights_dir`, also the generation and transfer stand-ins inside what the trainer builds itself: its
    `AsyncRolloutWorker` runs `StandInLoop`, and its weight transfer is a `FileWeightTransfer` to `weights_dir`.
    """
    import trl.experimental.async_grpo.async_grpo_trainer as trainer_module
    import trl.experimental.async_grpo.async_rollout_worker as worker_module
    import trl.experimental.async_grpo.packing as packing

    monkeypatch.setattr(packing, "_flash_attn", lambda: _CPUFlashAttention)
    monkeypatch.setattr(trainer_module, "get_peak_flops_per_device", lambda *args, **kwargs: None)
    monkeypatch.setattr(worker_module, "is_vllm_available", lambda: True)
    if weights_dir is not None:
        monkeypatch.setenv(WEIGHTS_DIR, str(weights_dir))
        monkeypatch.setattr(worker_module.AsyncRolloutWorker, "_loop_cls", StandInLoop)
        monkeypatch.setattr(trainer_module, "WeightTransferClient", lambda **kwargs: FileWeightTransfer(weights_dir))


class FileWeightTransfer:
    """NCCL's stand-in: sync `n` (version `n`) writes the weights to `directory/v<n>.safetensors`."""

    def __init__(self, directory):
        self.directory = str(directory)
        self.version = 0

    def init_weight_transfer(self):
        os.makedirs(self.directory, exist_ok=True)

    def pause(self):
        pass

    def send_weights(self, iterator):
        from safetensors.torch import save_file

        self.version += 1
        tensors = {name: tensor.detach().cpu().contiguous().clone() for name, tensor in iterator}
        temporary = os.path.join(self.directory, f".v{self.version}.tmp")
        save_file(tensors, temporary)
        os.replace(temporary, os.path.join(self.directory, f"v{self.version}.safetensors"))

    def resume(self):
        pass

    def destroy(self):
        pass


class StandInLoop(_AsyncRolloutLoop):
    """TRL's rollout loop, generating with the local model instead of a vLLM server. `delay_seed`: each turn
    first sleeps 0-20 ms drawn from it, so that groups finish out of order; `None`: no sleep, one turn at a time."""

    def __init__(self, *, weights_dir=None, delay_seed=None, generation_seed=0, **kwargs):
        super().__init__(**kwargs)
        torch.set_num_threads(1)  # beside the trainer's process on a 2-core machine
        # Built by TRL's trainer (no `weights_dir` argument), it reads the folder from the environment it inherits.
        self.weights_dir = weights_dir or os.environ[WEIGHTS_DIR]
        self.delays = None if delay_seed is None else np.random.default_rng(delay_seed)
        self.generator = torch.Generator().manual_seed(generation_seed)
        self.policy, self.policy_version = None, -1

    def _policy(self):
        if self.policy_version != self.model_version:
            from transformers import AutoModelForCausalLM

            if self.policy is None:
                self.policy = AutoModelForCausalLM.from_pretrained(self.model_name).eval()
            path = os.path.join(self.weights_dir, f"v{self.model_version}.safetensors")
            if os.path.exists(path):
                tiny.load_weights(self.policy, path)
            self.policy_version = self.model_version
        return self.policy

    async def _generate_one_turn(self, prompt_ids):
        await asyncio.sleep(0 if self.delays is None else float(self.delays.uniform(0, 0.02)))
        return self._sample(prompt_ids)

    @torch.no_grad()
    def _sample(self, prompt_ids):
        policy, ids, log_probs = self._policy(), list(prompt_ids), []
        for _ in range(self.max_tokens):
            logits = policy(torch.tensor([ids])).logits[0, -1].float()
            token = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator))
            log_probs.append(float(torch.log_softmax(logits, -1)[token]))
            ids.append(token)
            if token in self.eos_token_ids:
                break
        return ids[len(prompt_ids) :], log_probs


class _Forkserver:
    """`multiprocessing` as `AsyncRolloutWorker.__init__` reads it (`mp.get_context("spawn")`), answering with a
    forkserver context whose server has imported torch, transformers and TRL's worker once for the whole session."""

    context = None

    @classmethod
    def get_context(cls, method):
        if cls.context is None:
            cls.context = multiprocessing.get_context("forkserver")
            cls.context.set_forkserver_preload(["torch", "transformers", "trl.experimental.async_grpo"])
        return cls.context


class StandInWorker(AsyncRolloutWorker):
    """
    TRL's `AsyncRolloutWorker` (its child process, queues, health checks), running `StandInLoop`. Its child is forked
    from a forkserver instead of spawned: the same `_child_main` in a fresh process, without the 6 CPU seconds of
    imports each spawn costs (the test of the worker TRL builds itself keeps TRL's spawn).
    """

    _loop_cls = StandInLoop

    def __init__(self, **kwargs):
        import trl.experimental.async_grpo.async_rollout_worker as worker_module

        spawning, worker_module.mp = worker_module.mp, _Forkserver
        try:
            super().__init__(**kwargs)
        finally:
            worker_module.mp = spawning


class FirstWord:
    """Reward 1 when a completion's first word is of the kind prompt `idx` asks for by its level (`idx % 3`): any
    "p<i>" word (most of the vocabulary; an untrained model succeeds about 0.9 of the time), any letter (about 0.1),
    the letter "a" (about 0.01). Records every group it scores (it runs in the worker's process) as a JSON line in
    `path`."""

    __name__ = "first_word"

    def __init__(self, path):
        self.path = str(path)

    def __call__(self, completions, idx, **kwargs):
        kinds = (lambda w: w.startswith("p"), lambda w: len(w) == 1, lambda w: w == "a")
        rewards = []
        for completion, i in zip(completions, idx):
            words = completion[0]["content"].split()
            rewards.append(float(bool(words) and kinds[i % 3](words[0])))
        with open(self.path, "a") as f:
            f.write(json.dumps({"idx": int(idx[0]), "rewards": rewards}) + "\n")
        return rewards


class Constant:
    """The same reward for every completion (`None`: no reward), which no group of can have a gradient by."""

    __name__ = "constant"

    def __init__(self, value):
        self.value = value

    def __call__(self, completions, **kwargs):
        return [self.value] * len(completions)


def setup(directory, num_prompts=24):
    """`(model path, tokenizer, dataset)`: a 2-layer Qwen2 saved under `directory`, its word-level tokenizer with a
    plain chat template, and `num_prompts` conversational prompts "p<i> a b" with their `idx` and a `level`."""
    from datasets import Dataset

    tokenizer = tiny.build_tokenizer(
        WORDS,
        split="whitespace",
        padding_side="right",
        chat_template="{% for message in messages %}{{ message['content'] }} {% endfor %}",
    )
    # A response template TRL's parser accepts: completions are read as plain text.
    tokenizer.response_template = {"defaults": {"role": "assistant"}, "fields": {}}
    model = tiny.word_model(tokenizer)
    path = os.path.join(str(directory), "model")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    dataset = Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": f"p{i} a b"}] for i in range(num_prompts)],
            "idx": list(range(num_prompts)),
            "level": [i % 3 for i in range(num_prompts)],
        }
    )
    return path, tokenizer, dataset


def config(output_dir, **overrides):
    """The tests' `GRPOConfig` settings (`tiny.grpo_config`) as an `AsyncGRPOConfig`, for 4 steps of 2 groups of 4, 3
    tokens a completion, no token budget (no vLLM server to ask for one) and no gradient checkpointing."""
    from trl.experimental.async_grpo import AsyncGRPOConfig

    arguments = dict(max_steps=4, max_completion_length=3, token_budget=0, gradient_checkpointing=False)
    return tiny.grpo_config(output_dir, AsyncGRPOConfig, **{**arguments, **overrides})


def worker(model_path, tokenizer, dataset, reward, args, weights_dir, *, max_inflight_tasks, delay_seed=None):
    """The worker the trainer would build, with the generation stand-in."""
    return StandInWorker(
        model_name=model_path,
        dataset=dataset,
        reward_funcs=[reward],
        processing_class=tokenizer,
        eos_token_ids=[tokenizer.eos_token_id],
        num_generations=args.num_generations,
        max_inflight_tasks=max_inflight_tasks,
        max_tokens=args.max_completion_length,
        weights_dir=str(weights_dir),
        delay_seed=delay_seed,
    )
