"""The same integration through RLOOTrainer, and with LoRA adapters as the only trainable parameters."""

import numpy as np
import pytest
from harness import NormLog, RewardLog, prompt_dataset, replay, train, trainer_args

from trl_kgps import KGPSCallback, KGPSConfig


trl = pytest.importorskip("trl")


def test_rloo_trainer_one_line(tmp_path, model, tokenizer):
    events = []
    kgps = KGPSCallback(KGPSConfig(delta_norm_sample=1.0, feature_columns=[]))  # exact norms: compared with the oracle
    # beta 0: no reference model, which a tiny model built from a config has no checkpoint to load from
    args = trainer_args(tmp_path, trl.RLOOConfig, max_steps=20, beta=0.0)
    trainer = trl.RLOOTrainer(
        model=model,
        reward_funcs=RewardLog(events=events),
        args=args,
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
        callbacks=[NormLog(events), kgps],
    )
    trainer.train()
    assert kgps.trainer is trainer and kgps.ledger.batches_chosen > kgps.ledger.warmup_batches
    reference = replay(events, 16, kgps.ledger.warmup_batches)
    np.testing.assert_allclose(kgps.selector.mean, reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)


def test_lora_measures_the_adapters_only(tmp_path, model, tokenizer):
    from peft import LoraConfig

    events = []
    peft_config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    trainer, kgps, events = train(
        tmp_path, model, tokenizer, max_steps=14, events=events, trainer_kwargs={"peft_config": peft_config}
    )
    trainable = [name for name, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    assert len(kgps.adapter.delta.parameters) == len(trainable)
    oracle = [e[1] for e in events if e[0] == "norm"]
    logged = [entry["kgps/delta_norm"] for entry in trainer.state.log_history if "kgps/delta_norm" in entry]
    np.testing.assert_allclose(logged, oracle, rtol=1e-9)
    reference = replay(events, 16, kgps.ledger.warmup_batches)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)
