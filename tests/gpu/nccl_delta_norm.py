"""
Run with `torchrun --nproc_per_node 2 nccl_delta_norm.py OUT_JSON` on two GPUs: DDP over NCCL, each rank on its own
GPU, a few AdamW steps of a small Qwen2 in bf16, and after each the exact update norm against a float64 oracle on
the (replicated) parameters. Each rank writes `OUT_JSON` with `.RANK.json`.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import Qwen2Config, Qwen2ForCausalLM

from trl_kgps.adapters.distributed import ParameterDelta


def main(out):
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config).to(device=device, dtype=torch.bfloat16)
    ddp = DistributedDataParallel(model, device_ids=[device.index])
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=1e-3)
    delta = ParameterDelta(parameters)
    delta.reset()
    norms, oracle = [], []
    for step in range(4):
        tokens = torch.randint(512, (4, 32), device=device, generator=torch.Generator(device).manual_seed(step + rank))
        before = [p.detach().double().clone() for p in parameters]
        ddp(input_ids=tokens, labels=tokens).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        oracle.append(sum(float(((p.detach().double() - b) ** 2).sum()) for p, b in zip(parameters, before)) ** 0.5)
        norms.append(delta.step())
    with open(out.replace(".json", f".{rank}.json"), "w") as f:
        json.dump({"rank": rank, "device": str(device), "norms": norms, "oracle": oracle}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:])
