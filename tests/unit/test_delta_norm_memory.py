"""What the sampled parameter-update norm keeps: at most 1 % of a rank's values in their own dtype, small tensors
included, and an estimate that averages to the exact squared norm over its offsets."""

import math

import pytest
import torch

from trl_kgps.adapters.distributed import _BLOCK, ParameterDelta


def parameters_with_small_tensors(dtype=torch.float32):
    """Shaped like an FSDP2 shard of a transformer block: matrices, and norms and biases below 100 values."""
    torch.manual_seed(0)
    shapes = [(300, 64), (16,), (16,), (99,), (3,), (128, 64), (50,), (64,), (7,)] * 4
    return [torch.nn.Parameter(torch.randn(shape).to(dtype)) for shape in shapes]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_default_copies_at_most_one_percent_of_the_values_and_bytes(dtype):
    parameters = parameters_with_small_tensors(dtype)
    values = sum(p.numel() for p in parameters)
    for seed in range(10):
        delta = ParameterDelta(parameters, sample=0.01, seed=seed)
        delta.reset()
        assert sum(s.numel() for s in delta.snapshots) <= math.ceil(values / 100)
        # in the parameters' dtype: a float32 copy of bf16 values would take 2 %
        assert all(s.dtype == dtype for s in delta.snapshots)


def test_bfloat16_copies_still_give_the_exact_norm():
    parameters = parameters_with_small_tensors(torch.bfloat16)
    delta = ParameterDelta(parameters)
    delta.reset()
    before = [p.detach().double().clone() for p in parameters]
    with torch.no_grad():
        for p in parameters:
            p.add_(torch.randn_like(p))  # rounds to bf16: the realized change is what counts
    oracle = sum(float(((p.detach().double() - b) ** 2).sum()) for p, b in zip(parameters, before)) ** 0.5
    assert delta.step() == pytest.approx(oracle, rel=1e-9)


@pytest.mark.parametrize("sample", [0.1, 0.01])
def test_the_estimate_averaged_over_every_offset_is_the_exact_squared_norm(sample):
    # Each value is tracked at exactly one of the `stride` offsets: the mean of the squared estimates over all of
    # them is the exact squared norm, small tensors and tensors the sample skips included.
    parameters = parameters_with_small_tensors()
    exact = ParameterDelta(parameters)
    sampled = [ParameterDelta(parameters, sample=sample) for _ in range(ParameterDelta._stride(sample))]
    for offset, delta in enumerate(sampled):
        delta.offset = offset
    for delta in (exact, *sampled):
        delta.reset()
    with torch.no_grad():
        for p in parameters:
            p.add_(torch.randn_like(p) * torch.rand(()))
    squared = [delta.step() ** 2 for delta in sampled]
    assert sum(squared) / len(squared) == pytest.approx(exact.step() ** 2, rel=1e-9)


def test_the_stride_shares_no_factor_with_power_of_two_rows():
    # Only the even columns of a (256, 128) weight change. An even stride would track only even columns or only odd
    # ones, in every row (the estimate: sqrt(2) times the norm, or 0); 101 tracks both alike.
    assert [ParameterDelta._stride(s) for s in (1.0, 0.5, 0.1, 0.01)] == [1, 3, 11, 101]
    weight = torch.nn.Parameter(torch.zeros(256, 128))
    deltas = [ParameterDelta([weight], sample=0.01, seed=seed) for seed in range(10)]
    for delta in deltas:
        delta.reset()
    with torch.no_grad():
        weight[:, ::2] += 1.0
    for delta in deltas:
        assert delta.step() == pytest.approx(128.0, rel=0.1)  # sqrt(256 * 64)


def test_a_step_allocates_at_most_one_block_for_packed_tensors():
    # Three tensors just under one block each: packed together they would allocate three blocks per step.
    parameters = [torch.nn.Parameter(torch.zeros(_BLOCK * 6 // 10)) for _ in range(3)]
    delta = ParameterDelta(parameters)
    delta.reset()
    assert len(delta.snapshots) == 3 and max(s.numel() for s in delta.snapshots) <= _BLOCK
    with torch.no_grad():
        parameters[1].add_(2.0)
    assert delta.step() == pytest.approx(2.0 * math.sqrt(_BLOCK * 6 // 10))
