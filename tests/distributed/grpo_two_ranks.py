"""
Run with `torchrun --nproc_per_node 2 grpo_two_ranks.py OUT_DIR [--disagree]`: GRPO with KGPS on two CPU processes
(gloo, DDP). Each rank writes what it chose, what its reward function scored, its norms and its final selector state.
With `--disagree`, each rank is given its own seed, which KGPS must catch.
"""

import json
import os
import sys

import numpy as np
import torch.distributed as dist


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))

from harness import WORDS, NormLog, RewardLog, SpyKGPS, build_model, build_tokenizer, prompt_dataset, trainer_args  # noqa: E402
from teardown import finish  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from trl_kgps import KGPSConfig  # noqa: E402


def main(out_dir, disagree=False):
    events = []
    tokenizer = build_tokenizer(WORDS)
    kgps = SpyKGPS(KGPSConfig(delta_norm_sample=1.0, feature_columns=[]))  # exact norms: compared with the oracle
    # 3 prompts x 4 generations per generation batch, 6 completions per rank: the middle prompt's group is split.
    seed = int(os.environ["RANK"]) if disagree else 0
    args = trainer_args(out_dir, per_device_train_batch_size=3, steps_per_generation=2, max_steps=24, seed=seed)
    trainer = GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=RewardLog(seed=dist.get_rank() if dist.is_initialized() else 0, events=events),
        args=args,
        train_dataset=prompt_dataset(12),
        processing_class=tokenizer,
        callbacks=[NormLog(events), kgps],
    )
    trainer.train()
    rank = dist.get_rank()
    result = {
        "events": events,
        "lags": kgps.lags,
        "batches": kgps.batches,
        "mean": kgps.selector.mean.tolist(),
        "variance": kgps.selector.variance.tolist(),
        "warmup_batches": kgps.ledger.warmup_batches,
        "delta_norms": [e["kgps/delta_norm"] for e in trainer.state.log_history if "kgps/delta_norm" in e],
    }
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f, default=lambda x: np.asarray(x).tolist())
    finish()


if __name__ == "__main__":
    main(sys.argv[1], disagree="--disagree" in sys.argv)
