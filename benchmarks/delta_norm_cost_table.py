"""
KGPS's memory and time per step for the parameter-update norm at 0.6B, 8B and 70B parameters under DDP, FSDP2 and
DeepSpeed ZeRO-3 on 8 GPUs, for the default 1 % sample and the exact norm.

Memory is exact: `ParameterDelta` itself takes its reference copy of rank 0's share of each model, built on the meta
device (no memory, no weights) with Qwen3's shapes (the 70B one with Llama-3-70B's dimensions). Time is the number
of values this copy tracks times the nanoseconds per tracked value that `benchmarks/bench_trl_overhead.py` measured
on its 54M model, in the same dtype and sample; beside it, the same rank's AdamW step at the rate measured there.
Both are CPU projections: on a GPU the kernels and their ratio differ (`benchmarks/bench_delta_norm.py` measures
both norms against an AdamW step on the device it finds).

Run: `python benchmarks/delta_norm_cost_table.py benchmarks/results/trl_overhead.json` (a few seconds; the file is
what `python benchmarks/bench_trl_overhead.py --json benchmarks/results/trl_overhead.json` wrote).
"""

import argparse
import json
import math

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from trl_kgps.adapters.distributed import ParameterDelta


GPUS = 8
MODELS = {
    "0.6B": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16),
    "8B": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32),
    "70B": dict(hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64),
}
VOCAB = {"0.6B": 151936, "8B": 151936, "70B": 128256}
# The trainable parameters each rank holds, in the dtype of a usual bf16 run: DDP and FSDP2 keep float32 weights
# and compute in bf16; ZeRO-3 partitions bf16 weights (its float32 master copy sits in the optimizer).
BACKENDS = {"DDP": torch.float32, "FSDP2": torch.float32, "ZeRO-3": torch.bfloat16}


def rank0_share(shape: tuple[int, ...], backend: str) -> tuple[int, ...]:
    """The shape of rank 0's share of a parameter: whole (DDP), the first of `GPUS` chunks of dim 0 (FSDP2's
    `Shard(0)`), or the first of `GPUS` equal flat pieces (ZeRO-3's `ds_tensor`)."""
    if backend == "DDP":
        return shape
    if backend == "FSDP2":
        return (min(math.ceil(shape[0] / GPUS), shape[0]), *shape[1:])
    return (math.ceil(math.prod(shape) / GPUS),)


def shapes(name: str) -> list[tuple[int, ...]]:
    config = Qwen3Config(
        vocab_size=VOCAB[name],
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=name == "0.6B",
        **MODELS[name],
    )
    with torch.device("meta"):
        return [tuple(p.shape) for p in Qwen3ForCausalLM(config).parameters()]


def measured(constants: dict, dtype: torch.dtype, sample: float) -> dict:
    name = str(dtype).removeprefix("torch.")
    return next(c for c in constants["norm"] if c["dtype"] == name and c["sample"] == sample)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("constants", help="the JSON file bench_trl_overhead.py --json wrote")
    constants = json.loads(open(parser.parse_args().constants).read())
    adam_ns = measured(constants, torch.float32, 1.0)["ns_per_value_adam"]  # every backend's optimizer: float32
    print(
        f"Per rank, {GPUS} GPUs; time at the CPU rates measured by bench_trl_overhead.py "
        f"(AdamW {adam_ns:.2f} ns per float32 value):\n"
    )
    print("| model | backend | per rank | default (0.01): copy | time | / AdamW | exact (1): copy | time | / AdamW |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in MODELS:
        model = shapes(name)
        for backend, dtype in BACKENDS.items():
            local = [torch.empty(rank0_share(s, backend), dtype=dtype, device="meta") for s in model]
            values = sum(p.numel() for p in local)
            adam = values * adam_ns * 1e-9
            size = f"{values / 1e9:.2f}B" if values >= 1e9 else f"{values / 1e6:.0f}M"
            row = [name, backend, f"{size} {str(dtype).removeprefix('torch.')}"]
            for sample in (0.01, 1.0):
                delta = ParameterDelta([p.requires_grad_() for p in local], sample=sample)
                delta.reset()
                tracked = sum(s.numel() for s in delta.snapshots)
                copy = sum(s.numel() * s.element_size() for s in delta.snapshots)
                seconds = tracked * measured(constants, dtype, sample)["ns_per_tracked"] * 1e-9
                share = copy / (values * local[0].element_size())
                row += [f"{_bytes(copy)} ({share:.2%})", _seconds(seconds), f"{seconds / adam:.1%}"]
            print("| " + " | ".join(row) + " |")


def _bytes(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if s >= 1 else f"{s * 1e3:.1f} ms"


if __name__ == "__main__":
    main()
