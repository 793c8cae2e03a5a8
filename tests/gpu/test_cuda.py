"""
The GPU tier: what CPU cannot show. GRPO in bf16 on CUDA with the default selector and with LoRA, exact resume on
CUDA, the update norm on CUDA tensors against a float64 oracle, the sampled copy's memory, and two processes over
NCCL (the norm under DDP; GRPO under ZeRO-3 and FSDP2). Run with `python -m pytest -m gpu`; without CUDA every test
is skipped with its reason.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from harness import (
    WORDS,
    RewardLog,
    SpyKGPS,
    StepReward,
    StopAt,
    build_model,
    build_tokenizer,
    prompt_dataset,
    trainer_args,
)

from trl_kgps import KGPSCallback, KGPSConfig
from trl_kgps.adapters.distributed import ParameterDelta


trl = pytest.importorskip("trl")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: torch.cuda.is_available() is False"),
]
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(WORDS)


def cuda_args(tmp_path, **overrides):
    """The integration tests' GRPO arguments, on the GPU in bf16."""
    return trainer_args(tmp_path, **{"use_cpu": False, "bf16": True, **overrides})


def test_grpo_in_bf16_with_the_default_selector(tmp_path, tokenizer):
    kgps = KGPSCallback()
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=RewardLog(),
        args=cuda_args(tmp_path, max_steps=8),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    trainer.train()
    assert next(trainer.model.parameters()).device.type == "cuda"
    assert all(snapshot.device.type == "cuda" for snapshot in kgps.adapter.delta.snapshots)
    assert kgps.ledger.batches_scored == 8 and kgps.coverage > 0
    norms = [log["kgps/delta_norm"] for log in trainer.state.log_history if "kgps/delta_norm" in log]
    assert len(norms) == 8 and all(math.isfinite(n) for n in norms) and max(norms) > 0


def test_grpo_with_lora_in_bf16_measures_the_adapters_only(tmp_path, tokenizer):
    from peft import LoraConfig

    kgps = KGPSCallback(KGPSConfig(delta_norm_sample=1.0, feature_columns=[]))
    trainer = trl.GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=RewardLog(),
        args=cuda_args(tmp_path, max_steps=6, learning_rate=1e-2),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
        callbacks=[kgps],
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    trainer.train()
    tracked = kgps.adapter.delta.parameters
    assert tracked and all("lora_" in name for name, p in trainer.model.named_parameters() if p.requires_grad)
    assert sum(p.numel() for p in tracked) == sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
    # A step whose groups all tie has no gradient; Adam's momentum moves the adapters after the first that does.
    norms = [log["kgps/delta_norm"] for log in trainer.state.log_history if "kgps/delta_norm" in log]
    assert len(norms) == 6 and all(math.isfinite(n) for n in norms) and max(norms) > 0


def run(tmp_path, tokenizer, stop_at=None, resume=None):
    # Rewards depend on the step and the prompt only (StepReward); the update norms on the GPU's arithmetic, made as
    # repeatable as torch allows.
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        kgps = SpyKGPS(KGPSConfig())
        trainer = trl.GRPOTrainer(
            model=build_model(tokenizer),
            reward_funcs=StepReward(),
            args=cuda_args(tmp_path, max_steps=8, save_strategy="steps", save_steps=4),
            train_dataset=prompt_dataset(6),
            processing_class=tokenizer,
            callbacks=[kgps] + ([StopAt(stop_at)] if stop_at else []),
        )
        trainer.train(resume_from_checkpoint=resume)
        return kgps
    finally:
        torch.use_deterministic_algorithms(False)


def test_resume_on_cuda_selects_as_the_uninterrupted_run(tmp_path, tokenizer):
    straight = run(tmp_path / "straight", tokenizer)
    first = run(tmp_path / "split", tokenizer, stop_at=4)
    second = run(tmp_path / "split", tokenizer, resume=str(tmp_path / "split" / "checkpoint-4"))
    assert len(straight.batches) >= 8
    assert (first.batches + second.batches)[: len(straight.batches)] == straight.batches
    # The beliefs agree to the last bits a GPU reduction may move (the norms feed the process noise).
    np.testing.assert_allclose(second.selector.predicted_success(), straight.selector.predicted_success(), rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("sample", [1.0, 0.01])
def test_the_update_norm_on_cuda_matches_a_float64_oracle(dtype, sample):
    # The oracle: float64 differences of the values the tracked positions hold before and after, scaled by the
    # stride; with sample=1 every position is tracked.
    generator = torch.Generator(device="cuda").manual_seed(0)
    shapes = [(1024, 512), (512,), (3,), (2048, 256), (77,)]
    parameters = [
        torch.nn.Parameter(torch.randn(shape, device="cuda", generator=generator).to(dtype)) for shape in shapes
    ]
    delta = ParameterDelta(parameters, sample=sample, seed=3)
    delta.reset()
    before = torch.cat([p.detach().double().reshape(-1) for p in parameters])
    with torch.no_grad():
        for p in parameters:
            p.add_(1e-3 * torch.randn(p.shape, device="cuda", generator=generator).to(dtype))
    after = torch.cat([p.detach().double().reshape(-1) for p in parameters])
    tracked = (after - before)[delta.offset :: delta.stride]
    oracle = float((delta.stride * (tracked**2).sum()).sqrt())
    assert delta.step() == pytest.approx(oracle, rel=1e-9)


def test_the_sampled_copy_takes_at_most_one_percent_of_the_trainable_memory():
    parameters = [torch.nn.Parameter(torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)) for _ in range(8)]
    trainable = sum(p.numel() * p.element_size() for p in parameters)
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    delta = ParameterDelta(parameters, sample=0.01)
    delta.reset()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - start <= 0.01 * trainable


two_gpus = pytest.mark.skipif(
    torch.cuda.device_count() < 2,
    reason=f"needs two GPUs for two processes over NCCL ({torch.cuda.device_count()} seen)",
)


def torchrun(script, *args):
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    done = subprocess.run(
        [*command, str(script), *args],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]


@two_gpus
def test_two_processes_over_nccl_give_the_single_process_norm(tmp_path):
    torchrun(HERE / "nccl_delta_norm.py", str(tmp_path / "out.json"))
    ranks = [json.loads((tmp_path / f"out.{r}.json").read_text()) for r in (0, 1)]
    for rank in ranks:
        assert rank["device"] == f"cuda:{rank['rank']}"
        np.testing.assert_allclose(rank["norms"], rank["oracle"], rtol=1e-9)
    assert ranks[0]["norms"] == ranks[1]["norms"]


@two_gpus
@pytest.mark.parametrize("engine", ["zero3", "fsdp2"])
def test_grpo_sharded_over_two_gpus_measures_the_exact_norm(tmp_path, tokenizer, engine):
    # tests/distributed's ZeRO-3 and FSDP2 run on a GPU per process, over NCCL (its resume is CPU-tested there)
    if engine == "zero3":
        pytest.importorskip("deepspeed")
    build_model(tokenizer).save_pretrained(tmp_path / "model")
    script = HERE.parent / "distributed" / "sharded_two_ranks.py"
    torchrun(script, engine, str(tmp_path / "model"), str(tmp_path), "straight", "cuda")
    ranks = [json.loads((tmp_path / f"straight.rank{r}.json").read_text()) for r in (0, 1)]
    for r, rank in enumerate(ranks):
        assert rank["device"] == f"cuda:{r}"
        assert rank["partitioned"] == rank["parameters"] > 0, "the parameters were not sharded"
    assert ranks[0]["batches"] == ranks[1]["batches"] and ranks[0]["delta_norms"] == ranks[1]["delta_norms"]
    assert len(ranks[0]["delta_norms"]) == 8 and max(ranks[0]["oracle"]) > 0
    np.testing.assert_allclose(ranks[0]["delta_norms"], ranks[0]["oracle"], rtol=1e-6)
