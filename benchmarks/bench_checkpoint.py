"""
Time and size of the KGPS state file (`kgps_state.npz`) for large prompt pools: the selector's state, the observed
flags, the selection counts and the sampler's batches written atomically and read back, as `KGPSCallback` does beside
every saved model.

Then the digest of the train dataset's prompts that a checkpoint records (`trl_kgps.engine.prompts_digest`, computed once per run),
against reading the `prompt` column alone (`dataset["prompt"]` as a list), for text prompts and for conversations.

Run: `python benchmarks/bench_checkpoint.py`.
"""

import os
import statistics
import tempfile
import time

import numpy as np

from trl_kgps import KGPSSelector
from trl_kgps.engine import state_file as state_file
from trl_kgps.engine.prompts_digest import prompts_digest


def main():
    print("| prompts | file | save | load |")
    print("|---|---|---|---|")
    for n in (1_000_000, 10_000_000):
        # What the callback writes for a pool of n prompts: the selector's state, the observed flags, the counts,
        # and at their largest (an epoch's worth, at its end) the epoch's batches and the window of batches scored.
        arrays, meta = state_file.pack_selector(KGPSSelector(n).state_dict())
        batches = np.arange(n, dtype=np.int64).reshape(-1, 8)
        arrays.update(
            observed=np.ones(n, dtype=bool),
            times_selected=np.ones(n, dtype=np.int32),
            epoch_batches=batches,
            recent_batches=batches,
        )
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, state_file.STATE_FILE)
            saves, loads = [], []
            for _ in range(3):
                t0 = time.perf_counter()
                state_file.save(path, arrays, meta)
                saves.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                state_file.load(path)
                loads.append(time.perf_counter() - t0)
            size = os.path.getsize(path)
        print(
            f"| {n:.0e} | {size / 2**20:.0f} MiB | {statistics.median(saves):.2f} s | {statistics.median(loads):.2f} s |"
        )

    digest_table()


def digest_table(n=200_000):
    from datasets import Dataset

    print(f"\nDigest of {n:,} rows\n\n| rows | digest | reading the prompt column | ratio |\n|---|---|---|---|")
    text = [f"What is {i} + {7 * i}? Show your work." for i in range(n)]
    for kind, columns in (
        ("text prompts", {"prompt": text}),
        ("conversations", {"prompt": [[{"role": "user", "content": f"What is {i} + {7 * i}?"}] for i in range(n)]}),
        ("text prompts and an answer", {"prompt": text, "answer": [str(8 * i) for i in range(n)]}),
    ):
        dataset = Dataset.from_dict(columns)
        digest = statistics.median(_seconds(lambda d=dataset: prompts_digest(d)) for _ in range(3))
        read = statistics.median(_seconds(lambda d=dataset: list(d["prompt"])) for _ in range(3))
        print(f"| {kind} | {digest:.2f} s | {read:.2f} s | {digest / read:.1f}x |")


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
