"""
Distributed pieces of the TRL integration: the parameter-update norm over sharded parameters (on a 1 % sample by
default, exact on request), the check that every rank selects the same prompts, and the gather of the scored rows'
dataset indices. Every function is a no-op collective when the run is not distributed,
so callers keep one code path.
"""

import zlib
from collections.abc import Iterable

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor


_BLOCK = 1 << 20  # elements per block of the delta norm on a CPU: its float64 copy (8 MiB) stays in cache
# Elements per multi-tensor pass of the delta norm on an accelerator: its float32 temporaries stay under 384 MiB.
_DEVICE_CHUNK = 1 << 25


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _local_shard(param: torch.Tensor, world: int) -> tuple[torch.Tensor, int]:
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
        return param.to_local(), world // shards
    return param, world


class ParameterDelta:
    r"""
    \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) over trainable parameters, between two calls of `step()`.

    Keeps a reference copy of this rank's share of every trainable parameter in the parameter's own dtype (lossless;
    a bf16 copy of fp32 weights would round by more than an Adam step at lr 1e-6), takes differences in float32
    (exact for bf16/fp16 values, and for fp32 steps small against the weight), sums their squares in float64,
    divides each rank's sum by how many ranks hold the same values, and all-reduces once: exact for one process,
    DDP, FSDP2 and DeepSpeed ZeRO-1/2/3 alike, and for the LoRA adapters under PEFT (then the only trainable
    parameters). On a CPU it reads the values in cache-sized blocks; on an accelerator it runs multi-tensor kernels
    over chunks of `_DEVICE_CHUNK` values, with one host sync a step (`float` of the all-reduced total).

    With `sample < 1`, this rank's trainable values are read as one vector, parameter after parameter, and only every
    \\(s\\)-th of them is copied and compared, from one seeded offset \\(o \in [0, s)\\), where \\(s\\) is
    \\(\mathrm{round}(1 / \text{sample})\\) raised to the next odd prime (101 for 0.01; see `_stride`): each value is
    tracked with probability \\(1 / s\\), so \\(s\\) times the tracked squares is an unbiased estimate of the squared
    norm, and a rank holding \\(n\\) values copies at most \\(\lceil n / s \rceil\\) of them, small tensors included
    (under 1 % of its trainable memory at the default 0.01).

    Args:
        parameters (`Iterable[torch.nn.Parameter]`): the model's parameters; those without `requires_grad` are skipped.
        sample (`float`, *optional*, defaults to `1.0`): the fraction of values to track.
        seed (`int`, *optional*, defaults to `0`): seeds the offset \\(o\\).
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter], sample: float = 1.0, seed: int = 0):
        self.parameters = [p for p in parameters if p.requires_grad]
        self.stride = self._stride(sample)
        self.offset = int(np.random.default_rng(seed).integers(self.stride))
        # Parameters of up to _BLOCK tracked values are packed, per (dtype, device, weight), into reference copies of
        # at most _BLOCK values, so a step costs a few calls however many small tensors a model has and allocates
        # at most one pack's worth; larger ones keep their own copy. Pack: (parameter indices, weight, copy).
        self._packs: list[tuple[list[int], float, torch.Tensor]] | None = None
        self._copies: dict[int, torch.Tensor] = {}

    @staticmethod
    def _stride(sample: float) -> int:
        """`round(1 / sample)`, raised to the next odd prime when above 1. Weight matrices have rows whose length is a
        multiple of a large power of two (and often of 3): a stride sharing a factor with it visits the same few
        columns in every row, and the estimate inherits whatever sets those columns apart. On AdamW updates of a
        4.2M-parameter Qwen2, stride 100 spread the ratio to the exact norm 2.1 to 2.7 times as wide as 101."""
        stride = max(1, round(1 / sample))
        if stride == 1:
            return 1
        stride += 1 - stride % 2
        while any(stride % d == 0 for d in range(3, int(stride**0.5) + 1, 2)):
            stride += 2
        return stride

    @property
    def snapshots(self) -> list[torch.Tensor] | None:
        """The reference copies (packed ones included)."""
        if self._packs is None:
            return None
        return [copy for _, _, copy in self._packs] + list(self._copies.values())

    def _tracked(self) -> dict[int, tuple[torch.Tensor, float]]:
        """{parameter index: (tracked values of this rank's piece, weight of their squared sum)} for the parameters
        with a tracked value: the weight undoes sampling (`stride`) and counts values replicated on several ranks
        once (`1 / replicas`)."""
        tracked, world, start = {}, world_size(), 0
        for i, param in enumerate(self.parameters):
            local, replicas = _local_shard(param, world)
            flat = local.detach().reshape(-1)
            # this rank's vector is tracked at positions o, o + s, o + 2s, ...; this piece holds [start, start + n):
            # stride 101, offset 7, start 250 -> first = (7 - 250) % 101 = 60, the value at position 310 = 7 + 3 * 101
            first = (self.offset - start) % self.stride
            start += flat.numel()
            if first < flat.numel():
                tracked[i] = (flat[first :: self.stride], self.stride / replicas)
        return tracked

    @torch.no_grad()
    def reset(self) -> None:
        """Takes the reference copy."""
        self._packs, self._copies = [], {}
        groups: dict[tuple, list[int]] = {}
        tracked = self._tracked()
        for i, (values, weight) in tracked.items():
            if values.numel() > _BLOCK:
                self._copies[i] = values.clone()
            else:
                groups.setdefault((values.dtype, values.device, weight), []).append(i)
        for (_, _, weight), members in groups.items():
            for pack in _runs(members, [tracked[i][0].numel() for i in members], _BLOCK):
                self._packs.append((pack, weight, torch.cat([tracked[j][0] for j in pack])))

    @torch.no_grad()
    def step(self) -> float:
        """The norm of the change since the last `reset()` or `step()`, and a new reference copy. Collective."""
        if self._packs is None:
            raise RuntimeError("ParameterDelta.step() before reset(): there is no reference copy to compare with.")
        if not self.parameters:
            return 0.0
        tracked = self._tracked()
        # every rank joins the all-reduce, also one whose sample missed all of its (small) shard
        device = _local_shard(self.parameters[0], world_size())[0].device
        pairs = []  # (values now, their reference copy, weight)
        for k, (members, weight, old) in enumerate(self._packs):
            new = torch.cat([tracked[i][0] for i in members])
            pairs.append((new, old, weight))
            self._packs[k] = (members, weight, new)  # the new pack is the next reference
        copies = [(tracked[i][0], old, tracked[i][1]) for i, old in self._copies.items()]
        if _accelerated(device):
            total = _fused_squared_changes(pairs + copies, device)
            if copies:
                torch._foreach_copy_([old for _, old, _ in copies], [new for new, _, _ in copies])
        else:
            total = torch.zeros((), dtype=torch.float64, device=device)
            for new, old, weight in pairs:
                total += _squared_norm((_exact(new) - _exact(old)).double()).to(device) * weight
            for values, old, weight in copies:
                total += _squared_change(values, old).to(device) * weight
        if world_size() > 1:
            dist.all_reduce(total)
        return float(total.sqrt())


def _accelerated(device: torch.device) -> bool:
    """Whether the norm runs as multi-tensor kernels (an accelerator) rather than cache-sized blocks (a CPU)."""
    return device.type != "cpu"


def _fused_squared_changes(
    pairs: list[tuple[torch.Tensor, torch.Tensor, float]], device: torch.device
) -> torch.Tensor:
    """
    `sum(weight * sum((new - old)^2))` over `(new, old, weight)` pairs, as one float64 scalar on `device`: differences
    in float32 (exact for bf16/fp16 values), squares summed in float64, by foreach (multi-tensor) kernels over chunks
    of at most `_DEVICE_CHUNK` values, so the launches do not grow with the parameters' size. No host sync.
    """
    total = torch.zeros((), dtype=torch.float64, device=device)
    pieces: dict[float, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    for new, old, weight in pairs:
        pieces.setdefault(weight, []).extend(zip(new.split(_DEVICE_CHUNK), old.split(_DEVICE_CHUNK)))
    for weight, group in pieces.items():
        for chunk in _runs(group, [new.numel() for new, _ in group], _DEVICE_CHUNK):
            diffs = torch._foreach_sub([_exact(new) for new, _ in chunk], [_exact(old) for _, old in chunk])
            norms = torch._foreach_norm(diffs, 2, dtype=torch.float64)
            total += torch.stack(norms).square().sum().to(device) * weight
    return total


def _runs(items: list, sizes: list[int], limit: int):
    """`items` in consecutive runs whose `sizes` add up to at most `limit` (an item larger than `limit` alone)."""
    run, total = [], 0
    for item, size in zip(items, sizes):
        if run and total + size > limit:
            yield run
            run, total = [], 0
        run.append(item)
        total += size
    if run:
        yield run


def _squared_norm(diff: torch.Tensor) -> torch.Tensor:
    # torch.dot is 10x slower than vector_norm on float64 CPU vectors of ~1e5 entries (BLAS threading)
    return torch.linalg.vector_norm(diff) ** 2


def _exact(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` in a dtype where the difference of two of its values is exact: float32 for bf16 and fp16."""
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()


def _squared_change(values: torch.Tensor, snapshot: torch.Tensor) -> torch.Tensor:
    """`sum((values - snapshot)^2)` in float64, and `snapshot <- values`, a cache-sized block at a time."""
    total = torch.zeros((), dtype=torch.float64, device=values.device)
    for new, old in zip(values.split(_BLOCK), snapshot.split(_BLOCK)):
        diff = (_exact(new) - _exact(old)).double()
        total += _squared_norm(diff)
        old.copy_(new)
    return total


def fingerprint(*arrays: np.ndarray) -> int:
    """A 32-bit checksum of arrays' bytes."""
    checksum = 0
    for array in arrays:
        checksum = zlib.crc32(np.ascontiguousarray(array).tobytes(), checksum)
    return checksum


def gather_indices(local: np.ndarray, device: torch.device | str = "cpu") -> np.ndarray:
    """Every rank's `local` int64 array (all of one length), concatenated in rank order. Collective."""
    if world_size() == 1:
        return local
    mine = torch.as_tensor(local, dtype=torch.int64, device=device)
    everyone = [torch.empty_like(mine) for _ in range(world_size())]
    dist.all_gather(everyone, mine)
    return torch.cat(everyone).cpu().numpy()


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
