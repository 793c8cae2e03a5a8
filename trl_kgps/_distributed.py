"""
Distributed pieces of the TRL integration: the exact parameter-update norm over sharded parameters, and the check
that every rank selects the same prompts. Every function is a no-op collective when the run is not distributed,
so callers keep one code path.
"""

import zlib
from collections.abc import Iterable

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor


_BLOCK = 1 << 20  # elements per block of the delta norm: its float64 copy (8 MiB) stays in cache


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _local_shard(param: torch.Tensor) -> tuple[torch.Tensor, int]:
    """
    This rank's piece of a parameter, and on how many ranks that piece is replicated.

    - DeepSpeed ZeRO-3 partitions a parameter into disjoint flat pieces, `param.ds_tensor` (the visible `param` is
      empty outside a gather): replicated once.
    - An FSDP2 `DTensor` holds `to_local()`, sharded along its `Shard` mesh dimensions and replicated along the
      others (HSDP), and on every rank outside its mesh.
    - Any other tensor (one process, DDP, ZeRO-1/2) is the whole parameter, replicated on every rank.
    """
    if hasattr(param, "ds_tensor"):
        return param.ds_tensor, 1
    if isinstance(param, DTensor):
        shards = 1
        for dim, placement in enumerate(param.placements):
            if placement.is_shard():
                shards *= param.device_mesh.size(dim)
        return param.to_local(), world_size() // shards
    return param, world_size()


class ParameterDelta:
    r"""
    \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) over trainable parameters, between two calls of `step()`.

    Keeps a copy of this rank's share of every trainable parameter in its own dtype (a bf16 copy of fp32 weights
    would round by more than an Adam step at lr 1e-6), takes differences in float64, and sums each rank's squares
    divided by how many ranks hold the same values before one all-reduce — exact for one process, DDP, FSDP2 and
    DeepSpeed ZeRO-1/2/3 alike, with LoRA adapters only under PEFT (the only trainable parameters).

    With `sample < 1`, only every `round(1 / sample)`-th coordinate of each parameter, from a seeded random offset,
    is copied and compared, and the squares are scaled back: an unbiased estimate of the squared norm for that
    fraction of the memory.

    Args:
        parameters (`Iterable[torch.nn.Parameter]`): the model's parameters; those without `requires_grad` are skipped.
        sample (`float`, *optional*, defaults to `1.0`): the fraction of coordinates to track.
        seed (`int`, *optional*, defaults to `0`): seeds the sampled offsets.
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter], sample: float = 1.0, seed: int = 0):
        self.parameters = [p for p in parameters if p.requires_grad]
        self.stride = max(1, round(1 / sample))
        rng = np.random.default_rng(seed)
        self.offsets = [int(rng.integers(self.stride)) for _ in self.parameters]
        self.snapshots: list[torch.Tensor] | None = None

    def _tracked(self) -> Iterable[tuple[torch.Tensor, int, float]]:
        """(tracked values of this rank's piece, replication, scale of its squared sum) for every parameter."""
        for param, offset in zip(self.parameters, self.offsets):
            local, replicas = _local_shard(param)
            flat = local.detach().reshape(-1)
            if self.stride > 1 and flat.numel() >= self.stride:
                picked = flat[offset :: self.stride]
                yield picked, replicas, flat.numel() / picked.numel()
            else:
                yield flat, replicas, 1.0

    @torch.no_grad()
    def reset(self) -> None:
        """Takes the reference copy."""
        self.snapshots = [values.clone() for values, _, _ in self._tracked()]

    @torch.no_grad()
    def step(self) -> float:
        """The norm of the change since the last `reset()` or `step()`, and a new reference copy. Collective."""
        if self.snapshots is None:
            raise RuntimeError("ParameterDelta.step() before reset(): there is no reference copy to compare with.")
        tracked = list(self._tracked())
        if not tracked:
            return 0.0
        total = torch.zeros((), dtype=torch.float64, device=tracked[0][0].device)
        # Small tensors in one fused pass (per-tensor calls would cost more than the arithmetic), large ones in blocks.
        small = [i for i, (values, _, _) in enumerate(tracked) if values.numel() <= _BLOCK]
        if small:
            values = [_exact(tracked[i][0]) for i in small]
            old = [_exact(self.snapshots[i]) for i in small]
            norms = torch._foreach_norm(torch._foreach_sub(values, old), 2, dtype=torch.float64)
            weights = torch.tensor([tracked[i][2] / tracked[i][1] for i in small], dtype=torch.float64)
            total += (torch.stack(norms).to(weights.device) ** 2 * weights).sum().to(total.device)
            torch._foreach_copy_([self.snapshots[i] for i in small], [tracked[i][0] for i in small])
        for i in sorted(set(range(len(tracked))) - set(small)):
            values, replicas, scale = tracked[i]
            total += _squared_change(values, self.snapshots[i]) * (scale / replicas)
        if world_size() > 1:
            dist.all_reduce(total)
        return float(total.sqrt())


def _exact(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` in a dtype where the difference of two of its values is exact: float32 for bf16 and fp16."""
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()


def _squared_change(values: torch.Tensor, snapshot: torch.Tensor) -> torch.Tensor:
    """`sum((values - snapshot)^2)` in float64, and `snapshot <- values`, a cache-sized block at a time."""
    total = torch.zeros((), dtype=torch.float64, device=values.device)
    for new, old in zip(values.split(_BLOCK), snapshot.split(_BLOCK)):
        diff = (_exact(new) - _exact(old)).double()
        total += torch.dot(diff, diff)
        old.copy_(new)
    return total


def fingerprint(*arrays: np.ndarray) -> int:
    """A 32-bit checksum of arrays' bytes."""
    checksum = 0
    for array in arrays:
        checksum = zlib.crc32(np.ascontiguousarray(array).tobytes(), checksum)
    return checksum


def check_ranks_agree(what: str, value: int, device: torch.device | str = "cpu") -> None:
    """All-gathers `value` (an int) and raises if any rank differs. Collective; free on one process."""
    if world_size() == 1:
        return
    mine = torch.tensor([value], dtype=torch.int64, device=device)
    everyone = [torch.empty_like(mine) for _ in range(world_size())]
    dist.all_gather(everyone, mine)
    values = [int(v.item()) for v in everyone]
    if len(set(values)) > 1:
        raise RuntimeError(
            f"Ranks disagree on {what}: {dict(enumerate(values))} (rank: checksum). Every rank must see the same "
            "dataset in the same order and use the same seed; check that the dataset is not shuffled or filtered "
            "per rank before it reaches the trainer."
        )
