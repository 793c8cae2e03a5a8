"""
Run with `torchrun --nproc_per_node 2 fsdp_delta_norm.py MODEL_DIR OUT_JSON`: loads a tiny model with FSDP2-sharded
parameters, applies a known update, and writes ParameterDelta's norm beside the single-process reference: the same
update applied to an unsharded copy, its realized change measured in float64.
"""

import json
import sys

import torch
import torch.distributed as dist
from teardown import finish
from torch.distributed.tensor import DTensor, Replicate
from transformers import AutoModelForCausalLM, DistributedConfig

from trl_kgps.adapters.distributed import ParameterDelta, check_ranks_agree


def update_for(i, shape):
    return 1e-6 * torch.randn(shape, generator=torch.Generator().manual_seed(i), dtype=torch.float32)


def main(model_dir, out):
    dist.init_process_group("gloo")  # CPU processes: FSDP2's mesh follows this group
    reference = AutoModelForCausalLM.from_pretrained(model_dir)
    before = [p.detach().double().clone() for p in reference.parameters()]
    with torch.no_grad():
        for i, p in enumerate(reference.parameters()):
            p.add_(update_for(i, p.shape))
    full = sum(float(((p.detach().double() - b) ** 2).sum()) for p, b in zip(reference.parameters(), before)) ** 0.5

    model = AutoModelForCausalLM.from_pretrained(model_dir, distributed_config=DistributedConfig(fsdp_size=2))
    params = [p for p in model.parameters() if p.requires_grad]
    sharded = sum(isinstance(p, DTensor) and any(pl.is_shard() for pl in p.placements) for p in params)
    delta = ParameterDelta(model.parameters())
    delta.reset()
    with torch.no_grad():
        for i, p in enumerate(params):
            update = update_for(i, p.shape)
            if isinstance(p, DTensor):  # this rank's shard of the full update
                update = DTensor.from_local(update, p.device_mesh, [Replicate()] * p.device_mesh.ndim)
                update = update.redistribute(p.device_mesh, p.placements)
            p.add_(update)
    norm = delta.step()
    check_ranks_agree("the delta norm", int(norm * 1e12))
    result = {"rank": dist.get_rank(), "norm": norm, "reference": full, "sharded": sharded, "params": len(params)}
    with open(out.replace(".json", f".{dist.get_rank()}.json"), "w") as f:
        json.dump(result, f)
    finish()


if __name__ == "__main__":
    main(*sys.argv[1:])
