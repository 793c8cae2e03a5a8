"""
Run with `torchrun --nproc_per_node 2 async_two_ranks.py OUT_DIR`: TRL's AsyncGRPOTrainer with KGPS on two CPU
processes (gloo). Rank 0 holds the rollout worker (with the generation stand-in) and KGPS's selection engine; both
ranks train and measure the update norm. Each rank writes its norms; rank 0 also the engine's operations and state.
"""

import json
import os
import sys

import pytest


HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import async_standins as standins  # noqa: E402
from teardown import finish  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl.experimental.async_grpo import AsyncGRPOTrainer  # noqa: E402

from trl_kgps import KGPSCallback, KGPSConfig  # noqa: E402


class NormSpy(TrainerCallback):
    """Records every update norm KGPS measures on this rank."""

    def __init__(self, kgps):
        self.kgps, self.norms = kgps, []

    def on_train_begin(self, args, state, control, **kwargs):
        delta = self.kgps.adapter.delta
        step = delta.step

        def spy():
            self.norms.append(step())
            return self.norms[-1]

        delta.step = spy


def main(out_dir):
    standins.install(pytest.MonkeyPatch())
    rank = int(os.environ["RANK"])
    path, tokenizer, dataset = standins.setup(os.path.join(out_dir, f"rank{rank}"))
    # 4 completions per rank a step: one group of 4 per step across the two ranks.
    args = standins.config(os.path.join(out_dir, "run"), per_device_train_batch_size=4, max_steps=4)
    reward = standins.FirstWord(os.path.join(out_dir, "rewards.jsonl"))
    weights = os.path.join(out_dir, "weights")
    worker = (
        standins.worker(path, tokenizer, dataset, reward, args, weights, max_inflight_tasks=4) if rank == 0 else None
    )
    kgps = KGPSCallback(KGPSConfig(feature_columns=["level"], delta_norm_sample=1.0))
    norms = NormSpy(kgps)
    trainer = AsyncGRPOTrainer(
        model=path, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tokenizer,
        callbacks=[kgps, norms], rollout_worker=worker, weight_transfer=standins.FileWeightTransfer(weights),
    )  # fmt: skip
    trainer.train()
    out = {"norms": norms.norms, "steps": trainer.state.global_step}
    if rank == 0:
        out.update(
            batches_scored=kgps.ledger.batches_scored,
            mean=kgps.selector.mean.tolist(),
            logged=sorted({key for entry in trainer.state.log_history for key in entry if key.startswith("kgps/")}),
        )
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)
    finish()


if __name__ == "__main__":
    main(sys.argv[1])
