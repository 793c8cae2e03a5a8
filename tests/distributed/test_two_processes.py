"""
Two CPU processes under torchrun (gloo): GRPOTrainer under DDP, DeepSpeed ZeRO-3 and FSDP2, and the update norm on
FSDP2-sharded parameters. On a machine with GPUs the children see none: these tests are of CPU processes (two GPUs
over NCCL are `tests/gpu`'s).

DeepSpeed compiles its CPU communication op on first use (about a minute, with ninja and g++) into torch's extensions
cache, `TORCH_EXTENSIONS_DIR` or by default `~/.cache/torch_extensions`: keep that folder between CI runs to skip it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))

from harness import WORDS, build_model, build_tokenizer, replay  # noqa: E402

from trl_kgps import load_selector  # noqa: E402


pytestmark = [pytest.mark.distributed, pytest.mark.slow]


def torchrun(script, *args, cwd, check=True):
    # CUDA hidden: transformers would otherwise put an FSDP2 mesh on the GPUs, with NCCL and one device per rank.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "CUDA_VISIBLE_DEVICES": ""}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(HERE / script),
        *args,
    ]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done


def test_ddp_ranks_select_identically_from_gathered_rewards(tmp_path):
    torchrun("grpo_two_ranks.py", str(tmp_path), cwd=tmp_path)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["batches"] == ranks[1]["batches"]
    assert ranks[0]["mean"] == ranks[1]["mean"] and ranks[0]["variance"] == ranks[1]["variance"]
    # Each rank's reward function scored its own half of every generation batch; the selectors saw both halves.
    scored = [[e for e in rank["events"] if e[0] == "scored"] for rank in ranks]
    assert len(scored[0]) == len(scored[1]) > ranks[0]["warmup_batches"]
    merged, halves = [], iter(zip(*scored))
    for event in ranks[0]["events"]:
        if event[0] == "norm":
            merged.append(event)
        else:
            (_, idx0, r0), (_, idx1, r1) = next(halves)
            merged.append(("scored", idx0 + idx1, r0 + r1))
    for (_, idx, _), batch in zip((e for e in merged if e[0] == "scored"), ranks[0]["batches"]):
        assert idx == np.repeat(batch, 4).tolist()
    reference = replay(merged, 12, ranks[0]["warmup_batches"])
    np.testing.assert_allclose(ranks[0]["mean"], reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ranks[0]["variance"], reference.variance, rtol=1e-5, atol=1e-6)
    # DDP replicates the parameters: the all-reduced norm counts them once.
    oracle = [e[1] for e in ranks[0]["events"] if e[0] == "norm"]
    np.testing.assert_allclose(ranks[0]["delta_norms"], oracle, rtol=1e-9)


def test_fsdp2_sharded_delta_norm_equals_the_single_process_norm(tmp_path):
    build_model(build_tokenizer(WORDS)).save_pretrained(tmp_path / "model")
    torchrun("fsdp_delta_norm.py", str(tmp_path / "model"), str(tmp_path / "out.json"), cwd=tmp_path)
    ranks = [json.loads((tmp_path / f"out.{r}.json").read_text()) for r in (0, 1)]
    for rank in ranks:
        assert rank["sharded"] == rank["params"] > 0, "the parameters were not sharded"
        assert rank["norm"] == pytest.approx(rank["reference"], rel=1e-12)


def test_sampled_delta_norm_is_within_5_percent_of_the_exact_norm_under_ddp_and_fsdp2(tmp_path):
    # AdamW steps on a 0.5M-parameter Qwen2, DDP then FSDP2; 1 % of each rank's values, 4 offset seeds per step
    torchrun("sampled_delta_norm.py", str(tmp_path / "out.json"), cwd=tmp_path)
    ranks = [json.loads((tmp_path / f"out.{r}.json").read_text()) for r in (0, 1)]
    for backend in ("ddp", "fsdp2"):
        runs = [rank[backend] for rank in ranks]
        for run in runs:
            assert run["sharded"] == (run["tensors"] if backend == "fsdp2" else 0)
            assert run["tracked_values"] <= -(-run["local_values"] // 100)  # ceil(1 % of this rank's values)
        # every rank returns the same all-reduced norms; the exact one is the float64 oracle's
        assert runs[0]["exact"] == runs[1]["exact"] and runs[0]["sampled"] == runs[1]["sampled"]
        np.testing.assert_allclose(runs[0]["exact"], runs[0]["oracle"], rtol=1e-9)
        ratios = np.array(runs[0]["sampled"]) / np.array(runs[0]["exact"])[:, None]  # (steps, seeds)
        assert np.abs(ratios - 1).max() < 0.05, ratios


def test_ranks_with_different_seeds_fail_at_the_first_batch_with_each_ranks_checksum(tmp_path):
    done = torchrun("grpo_two_ranks.py", str(tmp_path), "--disagree", cwd=tmp_path, check=False)
    assert done.returncode != 0
    assert "Ranks disagree on generation batch 1 and its predictions" in done.stderr
    assert not (tmp_path / "rank0.json").exists()


@pytest.fixture(scope="module")
def resumed_runs(tmp_path_factory):
    """Both lags straight through and stopped at step 4 in one pair of processes, then resumed in another."""
    root = tmp_path_factory.mktemp("resume")
    torchrun("resume_two_ranks.py", str(root), "straight,first", "lag1,lag0", cwd=root)
    torchrun("resume_two_ranks.py", str(root), "resume", "lag1,lag0", cwd=root)
    return root


@pytest.mark.parametrize("lag", ["lag1", "lag0"])
def test_two_ranks_resume_exactly(resumed_runs, lag):
    for rank in (0, 1):
        straight, first, resumed = (
            json.loads((resumed_runs / lag / directory / f"{mode}.rank{rank}.json").read_text())
            for mode, directory in (("straight", "straight"), ("first", "split"), ("resume", "split"))
        )
        batches = first["batches"] + resumed["batches"]
        assert batches[: len(straight["batches"])] == straight["batches"]
        assert resumed["mean"] == straight["mean"] and resumed["variance"] == straight["variance"]


def test_async_grpo_on_two_ranks_rank_0_selects_and_both_measure_the_norm_between_versions(tmp_path):
    pytest.importorskip("aiohttp")
    pytest.importorskip("trl.experimental.async_grpo")
    from safetensors.torch import load_file

    from trl_kgps.adapters import async_trl_private as _async_trl

    try:
        _async_trl.check()
    except RuntimeError as error:
        pytest.skip(str(error))
    torchrun("async_two_ranks.py", str(tmp_path), cwd=tmp_path)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert ranks[0]["steps"] == ranks[1]["steps"] == 4
    # Both ranks measured every norm (a collective), the same, equal to the norm between the versions rank 0 sent.
    weights = [load_file(tmp_path / "weights" / f"v{v}.safetensors") for v in range(1, 6)]
    oracle = [
        sum(float(((new[name].double() - old[name].double()) ** 2).sum()) for name in new) ** 0.5
        for old, new in zip(weights, weights[1:])
    ]
    assert ranks[0]["norms"] == ranks[1]["norms"]
    np.testing.assert_allclose(ranks[0]["norms"], oracle, rtol=1e-6)
    # Rank 0 chose and learnt; its metrics reached the trainer's logs.
    assert ranks[0]["batches_scored"] >= 4
    assert {"kgps/mae", "kgps/delta_norm", "kgps/version_lag"} <= set(ranks[0]["logged"])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("model")
    build_model(build_tokenizer(WORDS)).save_pretrained(path)
    return path


def sharded_run(engine, model_dir, directory, mode):
    """Runs sharded_two_ranks.py and returns what each rank wrote."""
    directory.mkdir(exist_ok=True)
    torchrun("sharded_two_ranks.py", engine, str(model_dir), str(directory), mode, cwd=directory)
    return [json.loads((directory / f"{mode}.rank{r}.json").read_text()) for r in (0, 1)]


def check_sharded_run(ranks, wrapped):
    for rank in ranks:
        assert rank["wrapped"] == wrapped
        # each rank holds about half of every trainable parameter (ZeRO-3 pads its last partition)
        assert rank["partitioned"] == rank["parameters"] > 0, "the parameters were not sharded"
        assert rank["share"] == pytest.approx(0.5, abs=0.01)
    assert ranks[0]["batches"] == ranks[1]["batches"] and len(ranks[0]["batches"]) >= 8
    assert ranks[0]["delta_norms"] == ranks[1]["delta_norms"]
    # KGPS's norm from this rank's shards, all-reduced, against the norm between full float64 parameters
    assert len(ranks[0]["delta_norms"]) == len(ranks[0]["oracle"]) == 8 and max(ranks[0]["oracle"]) > 0
    np.testing.assert_allclose(ranks[0]["delta_norms"], ranks[0]["oracle"], rtol=1e-9)


def test_deepspeed_zero3_runs_kgps_with_the_exact_norm_and_resumes_exactly(tmp_path, model_dir):
    pytest.importorskip("deepspeed")
    straight = sharded_run("zero3", model_dir, tmp_path / "straight", "straight")
    check_sharded_run(straight, "DeepSpeedEngine")
    first = sharded_run("zero3", model_dir, tmp_path / "split", "first")
    # checkpoint-4 is DeepSpeed's: each rank's partition of the weights and optimizer, and KGPS's state beside them
    checkpoint = tmp_path / "split" / "checkpoint-4"
    assert len(list((checkpoint / "global_step4").glob("zero_pp_rank_*_optim_states.pt"))) == 2
    saved = load_selector(checkpoint)
    assert saved.mean.tolist() == first[0]["mean"] and saved.variance.tolist() == first[0]["variance"]
    resumed = sharded_run("zero3", model_dir, tmp_path / "split", "resume")
    for rank in (0, 1):
        batches = first[rank]["batches"] + resumed[rank]["batches"]
        assert batches[: len(straight[rank]["batches"])] == straight[rank]["batches"]
        # the restored log history holds the first half's norms, the resumed run the second half's
        assert resumed[rank]["delta_norms"] == straight[rank]["delta_norms"]
        assert resumed[rank]["mean"] == straight[rank]["mean"]
        assert resumed[rank]["variance"] == straight[rank]["variance"]


def test_fsdp2_from_distributed_config_runs_kgps_with_the_exact_norm(tmp_path, model_dir):
    # Accelerate's FSDP plugin runs DDP on CPU processes; a model sharded at load time is FSDP2 there too.
    ranks = sharded_run("fsdp2", model_dir, tmp_path, "straight")
    check_sharded_run(ranks, "FSDPQwen2ForCausalLM")
    # transformers cannot resume such a model (no optimizer state in its checkpoints); they still carry KGPS's state
    saved = load_selector(tmp_path / "checkpoint-8")
    assert saved.mean.tolist() == ranks[0]["mean"] and saved.variance.tolist() == ranks[0]["variance"]
