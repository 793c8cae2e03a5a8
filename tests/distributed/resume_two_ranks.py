"""
Run with `torchrun --nproc_per_node 2 resume_two_ranks.py OUT_DIR MODES LAGS`: 8-step GRPO runs with KGPS on two
CPU processes, for each lag of `LAGS` (comma-separated `lag1`, `lag0`) and each mode of `MODES` (comma-separated, in
order): `straight` through (in `OUT_DIR/<lag>/straight`), `first`, stopped after step 4 (`checkpoint-4` in
`OUT_DIR/<lag>/split`), or `resume`d from it, which the test runs in processes of their own. Each rank writes the
batches it chose and its final selector state.
"""

import json
import os
import sys

import torch.distributed as dist


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))

from harness import WORDS, SpyKGPS, StepReward, StopAt, build_model, build_tokenizer, prompt_dataset, trainer_args  # noqa: E402
from teardown import finish  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from trl_kgps import KGPSConfig  # noqa: E402


# lag 1: 2 prompts a generation batch, one per rank, 6 prompts; lag 0: 4 prompts spanning two steps, 12 prompts
CONFIGS = {"lag1": (6, {}), "lag0": (12, {"steps_per_generation": 2})}


def main(out_root, modes, lags):
    for lag in lags.split(","):
        for mode in modes.split(","):
            out_dir = os.path.join(out_root, lag, "straight" if mode == "straight" else "split")
            os.makedirs(out_dir, exist_ok=True)
            run(out_dir, mode, lag)
    finish()


def run(out_dir, mode, lag):
    num_prompts, extra = CONFIGS[lag]
    tokenizer = build_tokenizer(WORDS)
    kgps = SpyKGPS(KGPSConfig())
    args = trainer_args(
        out_dir, per_device_train_batch_size=4, max_steps=8, save_strategy="steps", save_steps=4, **extra
    )
    trainer = GRPOTrainer(
        model=build_model(tokenizer),
        reward_funcs=StepReward(),
        args=args,
        train_dataset=prompt_dataset(num_prompts),
        processing_class=tokenizer,
        callbacks=[kgps, StopAt(4)] if mode == "first" else [kgps],
    )
    trainer.train(resume_from_checkpoint=os.path.join(out_dir, "checkpoint-4") if mode == "resume" else None)
    result = {
        "batches": kgps.batches,
        "mean": kgps.selector.mean.tolist(),
        "variance": kgps.selector.variance.tolist(),
    }
    with open(os.path.join(out_dir, f"{mode}.rank{dist.get_rank()}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:])
