"""
Run with `torchrun --nproc_per_node 2 sampled_delta_norm.py OUT_JSON [--hidden 128 --layers 2 --steps 6 --seeds 4]`:
trains a small Qwen2 built from a config with AdamW on random tokens, first with DDP (every rank holds the whole
model), then with FSDP2-sharded parameters, and after every optimizer step records the exact norm
(`ParameterDelta(sample=1)`), a float64 oracle on the gathered full parameters, and the sampled estimate
(`ParameterDelta(sample=0.01)`) for each of several offset seeds. Each rank writes `OUT_JSON` with `.RANK.json`.
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
from teardown import finish
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoModelForCausalLM, DistributedConfig, Qwen2Config, Qwen2ForCausalLM

from trl_kgps.adapters.distributed import ParameterDelta


def full_copy(parameters):
    """Every trainable parameter whole, in float64 (collective for DTensors)."""
    return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().double().clone() for p in parameters]


def train(model, parameters, args, forward):
    """Steps AdamW `args.steps` times on random tokens (each rank its own); per step, the oracle, exact and sampled
    norms."""
    rank = dist.get_rank()
    optimizer = torch.optim.AdamW(parameters, lr=args.lr)
    exact = ParameterDelta(parameters, sample=1.0)
    sampled = [ParameterDelta(parameters, sample=args.sample, seed=seed) for seed in range(args.seeds)]
    for delta in (exact, *sampled):
        delta.reset()
    record = {"oracle": [], "exact": [], "sampled": []}
    for step in range(args.steps):
        tokens = torch.randint(
            model.config.vocab_size,
            (args.batch, args.length),
            generator=torch.Generator().manual_seed(step * 97 + rank),
        )
        before = full_copy(parameters)
        forward(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        after = full_copy(parameters)
        record["oracle"].append(sum(float(((a - b) ** 2).sum()) for a, b in zip(after, before)) ** 0.5)
        record["exact"].append(exact.step())
        record["sampled"].append([delta.step() for delta in sampled])
    local = sum((p.to_local() if isinstance(p, DTensor) else p).numel() for p in parameters)
    record["local_values"], record["tracked_values"] = local, sum(s.numel() for s in sampled[0].snapshots)
    record["tensors"] = len(parameters)
    record["sharded"] = sum(isinstance(p, DTensor) and any(pl.is_shard() for pl in p.placements) for p in parameters)
    return record


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--sample", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model_dir = os.path.join(os.path.dirname(os.path.abspath(args.out)), "sampled_delta_norm_model")
    if rank == 0:
        torch.manual_seed(0)
        config = Qwen2Config(
            vocab_size=args.vocab,
            hidden_size=args.hidden,
            intermediate_size=3 * args.hidden,
            num_hidden_layers=args.layers,
            num_attention_heads=max(1, args.hidden // 32),
            num_key_value_heads=max(1, args.hidden // 64),
            max_position_embeddings=args.length,
            tie_word_embeddings=True,
        )
        Qwen2ForCausalLM(config).save_pretrained(model_dir)
    dist.barrier()
    result = {"rank": rank, "sample": args.sample}

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    parameters = [p for p in model.parameters() if p.requires_grad]
    result["params"] = sum(p.numel() for p in parameters)
    result["ddp"] = train(model, parameters, args, DistributedDataParallel(model))
    del model, parameters

    model = AutoModelForCausalLM.from_pretrained(model_dir, distributed_config=DistributedConfig(fsdp_size=2))
    parameters = [p for p in model.parameters() if p.requires_grad]
    result["fsdp2"] = train(model, parameters, args, model)
    with open(args.out.replace(".json", f".{rank}.json"), "w") as f:
        json.dump(result, f)
    del model, parameters
    finish()


if __name__ == "__main__":
    sys.exit(main())
