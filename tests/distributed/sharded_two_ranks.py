"""
Run with `torchrun --nproc_per_node 2 sharded_two_ranks.py zero3|fsdp2 MODEL_DIR OUT_DIR straight|first|resume
[cpu|cuda]`: an 8-step GRPO run with KGPS whose parameters are sharded over both processes, by DeepSpeed ZeRO-3 (the
trainer's `deepspeed` config) or by FSDP2 (`from_pretrained(..., distributed_config=DistributedConfig(fsdp_size=2))`),
straight through, or stopped after step 4 (checkpoint-4), or resumed from it; on CPU processes over gloo (the
default), or one GPU each over NCCL. Each rank writes how it held the parameters, the batches it chose, KGPS's norms
beside the oracle's, and its final selector state.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from transformers import AutoModelForCausalLM, TrainerCallback


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))

from harness import SpyKGPS, StepReward, StopAt, build_tokenizer, prompt_dataset, trainer_args  # noqa: E402
from teardown import finish  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from trl_kgps import KGPSConfig  # noqa: E402


# ZeRO-3 in float32 with every parameter partitioned (no persistence threshold), the batch sizes the trainer's.
ZERO3 = {
    "zero_optimization": {
        "stage": 3,
        "overlap_comm": False,
        "contiguous_gradients": True,
        "stage3_param_persistence_threshold": 0,
        "stage3_gather_16bit_weights_on_model_save": True,
    },
    "bf16": {"enabled": False},
    "fp16": {"enabled": False},
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "train_batch_size": "auto",
    "gradient_clipping": "auto",
}


def full_parameters(params: list[torch.Tensor]) -> list[torch.Tensor]:
    """Float64 copies of the whole parameters, gathered from their shards. Collective."""
    if any(hasattr(p, "ds_tensor") for p in params):
        import deepspeed

        with deepspeed.zero.GatheredParameters(params):
            return [p.detach().double().clone() for p in params]
    return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().double().clone() for p in params]


class FullNormLog(TrainerCallback):
    """The oracle: ||theta_t - theta_{t-1}||_2 after every optimizer step, between full float64 parameters."""

    def __init__(self):
        self.norms = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.previous = full_parameters(self.params)

    def on_optimizer_step(self, args, state, control, **kwargs):
        current = full_parameters(self.params)
        self.norms.append(sum(float(((c - p) ** 2).sum()) for c, p in zip(current, self.previous)) ** 0.5)
        self.previous = current


def held(param: torch.Tensor) -> tuple[int, int]:
    """(values this rank holds of `param`, values in `param`)."""
    if hasattr(param, "ds_tensor"):  # ZeRO-3: this rank's flat partition, the last one padded
        return min(param.ds_tensor.numel(), param.ds_numel), param.ds_numel
    if isinstance(param, DTensor):
        return param.to_local().numel(), param.numel()
    return param.numel(), param.numel()


def main(engine, model_dir, out_dir, mode, device="cpu"):
    tokenizer = build_tokenizer()
    kgps = SpyKGPS(KGPSConfig(delta_norm_sample=1.0, feature_columns=[]))  # exact norms: compared with the oracle
    oracle = FullNormLog()
    if engine == "fsdp2":
        from transformers import DistributedConfig

        if device == "cuda":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl" if device == "cuda" else "gloo")  # FSDP2's mesh follows this group
        model = AutoModelForCausalLM.from_pretrained(model_dir, distributed_config=DistributedConfig(fsdp_size=2))
        # transformers checkpoints no optimizer state of a model sharded at load time, and refuses to save more
        extra = {"save_only_model": True}
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        extra = {"deepspeed": ZERO3}
    # 2 prompts a generation batch, one per rank, 6 prompts; a checkpoint every 4 steps
    args = trainer_args(
        out_dir,
        use_cpu=device == "cpu",
        per_device_train_batch_size=4,
        max_steps=8,
        save_strategy="steps",
        save_steps=4,
        **extra,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=StepReward(),
        args=args,
        train_dataset=prompt_dataset(6),
        processing_class=tokenizer,
        callbacks=[oracle, kgps, StopAt(4)] if mode == "first" else [oracle, kgps],
    )
    trainer.train(resume_from_checkpoint=os.path.join(out_dir, "checkpoint-4") if mode == "resume" else None)
    shares = [held(p) for p in trainer.model.parameters() if p.requires_grad]
    result = {
        "wrapped": type(trainer.model_wrapped).__name__,
        "parameters": len(shares),
        "partitioned": sum(local < numel for local, numel in shares),
        "share": sum(local for local, _ in shares) / sum(numel for _, numel in shares),
        "device": str(kgps.adapter.delta.snapshots[0].device),
        "batches": kgps.batches,
        "delta_norms": [e["kgps/delta_norm"] for e in trainer.state.log_history if "kgps/delta_norm" in e],
        "oracle": oracle.norms,
        "mean": kgps.selector.mean.tolist(),
        "variance": kgps.selector.variance.tolist(),
    }
    with open(os.path.join(out_dir, f"{mode}.rank{dist.get_rank()}.json"), "w") as f:
        json.dump(result, f)
    finish()


if __name__ == "__main__":
    main(*sys.argv[1:])
