"""The parameter-update norm on one process, and its shard logic on objects shaped like ZeRO-3 partitions."""

import numpy as np
import pytest
import torch

from trl_kgps.adapters.distributed import ParameterDelta, _local_shard


def float64_sums_agree(n):
    """
    How far two norms of the same `n` float64 squares may differ in relative terms when summed in another order (a
    blocked and a fused kernel, another torch release): each sum is within `(n - 1) u` of the exact one (`u` the unit
    roundoff, recursive summation's worst case), each square root halves that, and the two errors add: `n u`.
    """
    return n * np.finfo(np.float64).eps / 2


def step_and_norm(parameters, delta, update):
    before = [p.detach().double().clone() for p in parameters]
    with torch.no_grad():
        for p, u in zip(parameters, update):
            p.add_(u)
    oracle = sum(float(((p.detach().double() - b) ** 2).sum()) for p, b in zip(parameters, before)) ** 0.5
    return delta.step(), oracle


def test_exact_for_float32_steps_below_bfloat16_resolution():
    torch.manual_seed(0)
    parameters = [torch.nn.Parameter(torch.randn(100, 30)), torch.nn.Parameter(torch.randn(7))]
    frozen = torch.nn.Parameter(torch.randn(50), requires_grad=False)
    delta = ParameterDelta([*parameters, frozen])
    delta.reset()
    update = [1e-6 * torch.randn_like(p) for p in parameters]
    got, oracle = step_and_norm(parameters, delta, update)
    assert got == pytest.approx(oracle, rel=1e-9)
    # the same norm from a bfloat16 copy is dominated by rounding
    bf16 = sum(
        float(((p.detach() - (p.detach() - u).bfloat16().float()) ** 2).sum()) for p, u in zip(parameters, update)
    )
    assert abs(bf16**0.5 - oracle) > 10 * oracle
    got, oracle = step_and_norm(parameters, delta, [torch.zeros_like(p) for p in parameters])
    assert got == oracle == 0.0


def test_frozen_parameters_are_ignored():
    trainable, frozen = torch.nn.Parameter(torch.zeros(4)), torch.nn.Parameter(torch.zeros(4), requires_grad=False)
    delta = ParameterDelta([trainable, frozen])
    delta.reset()
    with torch.no_grad():
        frozen.add_(1.0)
        trainable.add_(torch.tensor([3.0, 0.0, 0.0, 4.0]))
    assert delta.step() == 5.0


class ZeroThreePartition(torch.nn.Parameter):
    """Shaped like a DeepSpeed ZeRO-3 parameter: an empty visible tensor, this rank's flat piece in `ds_tensor`, for
    the shard arithmetic in one process (the real ZeRO-3 runs in tests/distributed)."""

    def __new__(cls, partition):
        param = super().__new__(cls, torch.empty(0), requires_grad=True)
        param.ds_tensor = partition
        return param


def test_zero3_partitions_are_read_from_ds_tensor_and_counted_once():
    partition = torch.randn(64)
    param = ZeroThreePartition(partition)
    local, replicas = _local_shard(param, world=4)
    assert local is partition and replicas == 1
    delta = ParameterDelta([param])
    delta.reset()
    partition.add_(torch.full((64,), 0.5))
    assert delta.step() == pytest.approx(0.5 * 8.0)


def test_plain_parameters_count_as_replicated_on_every_rank():
    # DDP and ZeRO-1/2 hold the whole parameter on every rank
    assert _local_shard(torch.nn.Parameter(torch.ones(3)), world=4)[1] == 4


@pytest.mark.parametrize("sample", [0.1, 0.01])
def test_sampled_norm_is_unbiased_and_close(sample):
    torch.manual_seed(0)
    parameters = [torch.nn.Parameter(torch.randn(200_000)), torch.nn.Parameter(torch.randn(3))]
    estimates = []
    for seed in range(20):
        delta = ParameterDelta(parameters, sample=sample, seed=seed)
        delta.reset()
        update = [1e-3 * torch.randn_like(p) for p in parameters]
        got, oracle = step_and_norm(parameters, delta, update)
        estimates.append(got / oracle)
    estimates = np.array(estimates)
    assert abs(estimates.mean() - 1) < 0.02 and estimates.std() < 0.05


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("sample", [1.0, 0.01])
def test_the_accelerator_path_gives_the_cpu_path_s_norm(monkeypatch, dtype, sample):
    # The multi-tensor path an accelerator takes, run here on CPU tensors, against the cache-blocked CPU path: the
    # same norms over three steps (its reference copies refreshed), with tensors split and chunked (a small chunk) and
    # one above the CPU's block size. Differences stay exact for bf16/fp16 values: steps below their resolution at
    # the weights' scale are rounded away alike, and the realized changes are what both measure.
    import trl_kgps.adapters.distributed as distributed

    torch.manual_seed(0)
    shapes = [(distributed._BLOCK + 5,), (300, 64), (16,), (7,), (128, 64)]
    parameters = [torch.nn.Parameter(torch.randn(shape).to(dtype)) for shape in shapes]
    blocked = ParameterDelta(parameters, sample=sample, seed=1)
    fused = ParameterDelta(parameters, sample=sample, seed=1)
    blocked.reset()
    fused.reset()
    for step in range(3):
        before = [p.detach().double().clone() for p in parameters]
        with torch.no_grad():
            for p in parameters:
                p.add_(torch.randn_like(p) * 10.0 ** (-step))
        norm = blocked.step()
        monkeypatch.setattr(distributed, "_accelerated", lambda device: True)
        monkeypatch.setattr(distributed, "_DEVICE_CHUNK", 5000)
        assert fused.step() == pytest.approx(norm, rel=float64_sums_agree(sum(p.numel() for p in parameters)))
        monkeypatch.undo()
        if sample == 1.0 and dtype != torch.float32:  # float32 differences are exact for bf16/fp16 values
            oracle = sum(float(((p.detach().double() - b) ** 2).sum()) for p, b in zip(parameters, before)) ** 0.5
            assert norm == pytest.approx(oracle, rel=float64_sums_agree(sum(p.numel() for p in parameters)))
