"""
`GRPOTrainer(use_vllm=True, vllm_mode="server")` with `KGPSCallback()`: the generation batches go to a vLLM server
through TRL's real `VLLMClient`, here a stand-in server on CPU (`vllm_standin.py` says what stands in for vLLM and
its NCCL weight transfer, and why). KGPS must choose, attribute and resume as it does when the trainer generates.
"""

import inspect

import numpy as np
import pytest
from harness import NormLog, RewardLog, SpyKGPS, StepReward, StopAt, build_model, prompt_dataset, replay, trainer_args
from vllm_standin import StandInServer, install, received_norms

from trl_kgps import KGPSConfig


trl = pytest.importorskip("trl")
vllm_client = pytest.importorskip("trl.generation.vllm_client")
if "/v1/completions" not in inspect.getsource(vllm_client.VLLMClient.generate):
    pytest.skip(
        "this TRL's VLLMClient speaks `trl vllm-serve`'s own protocol, not vLLM's OpenAI-compatible one that the "
        "stand-in server answers",
        allow_module_level=True,
    )

NUM_PROMPTS = 12
CONFIG = KGPSConfig(delta_norm_sample=1.0, feature_columns=[])


def run(tmp_path, tokenizer, monkeypatch, reward, events=None, max_steps=6, stop_at=None, resume=None):
    """A run generating through a fresh stand-in server that starts from the initial model, as `vllm serve` would."""
    install(monkeypatch)
    kgps = SpyKGPS(CONFIG)
    callbacks = [NormLog([] if events is None else events), kgps] + ([StopAt(stop_at)] if stop_at else [])
    with StandInServer(build_model(tokenizer), tokenizer.eos_token_id) as server:
        trainer = trl.GRPOTrainer(
            model=build_model(tokenizer),
            reward_funcs=reward,
            args=trainer_args(
                tmp_path,
                use_vllm=True,
                vllm_mode="server",
                vllm_server_base_url=server.url,
                vllm_server_timeout=30,
                max_steps=max_steps,
                save_strategy="steps",
                save_steps=3,
            ),
            train_dataset=prompt_dataset(NUM_PROMPTS),
            processing_class=tokenizer,
            callbacks=callbacks,
        )
        trainer.train(resume_from_checkpoint=resume)
    return kgps, server


def prompt_indices(server, tokenizer):
    """The dataset index of every prompt the server was asked to complete, request by request ("p<i> a b")."""
    return [
        [int(tokenizer.decode(ids, skip_special_tokens=True).split()[0][1:]) for ids in r] for r in server.requests
    ]


def test_the_server_completes_kgps_s_batches_and_kgps_learns_their_rewards_and_the_synced_weights_norms(
    tmp_path, tokenizer, monkeypatch
):
    events = []
    kgps, server = run(tmp_path, tokenizer, monkeypatch, RewardLog(events=events), events=events)

    # Each generation batch KGPS chose went to the server, in order, as one request of its distinct prompts.
    assert prompt_indices(server, tokenizer) == kgps.batches[: len(server.requests)]
    assert len(server.requests) == kgps.ledger.batches_scored == 6
    # The rewards of those completions reached KGPS for the prompts they belong to, and the norm of each update is
    # the one between the weights the trainer synced to the server before and after it.
    scored = [e[1] for e in events if e[0] == "scored"]
    assert [sorted(set(idx)) for idx in scored] == [sorted(b) for b in kgps.batches[: len(scored)]]
    oracle = [e[1] for e in events if e[0] == "norm"]
    assert len(server.syncs) == 6
    np.testing.assert_allclose(received_norms(server), oracle[:5], rtol=1e-9)
    reference = replay(events, NUM_PROMPTS, kgps.ledger.warmup_batches, CONFIG)
    np.testing.assert_allclose(kgps.selector.mean, reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)


def test_a_run_generating_through_the_server_resumes_exactly(tmp_path, tokenizer, monkeypatch):
    straight, _ = run(tmp_path / "straight", tokenizer, monkeypatch, StepReward())
    first, _ = run(tmp_path / "split", tokenizer, monkeypatch, StepReward(), stop_at=3)
    checkpoint = str(tmp_path / "split" / "checkpoint-3")
    second, server = run(tmp_path / "split", tokenizer, monkeypatch, StepReward(), resume=checkpoint)

    # The resumed trainer synced the checkpoint's weights to a fresh server before generating: the same completions,
    # rewards, beliefs and batches as the run that was never interrupted.
    assert len(server.requests) == 3
    assert first.batches + second.batches == straight.batches
    np.testing.assert_array_equal(second.selector.mean, straight.selector.mean)
    np.testing.assert_array_equal(second.selector.variance, straight.selector.variance)
    np.testing.assert_array_equal(second.ledger.times_selected, straight.ledger.times_selected)
