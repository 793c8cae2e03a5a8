"""
Time and size of the KGPS state file (`kgps_state.npz`) for large prompt pools: the selector's state, the observed
flags, the selection counts and the sampler's batches written atomically and read back, as `KGPSCallback` does beside
every saved model.

Run: `python benchmarks/bench_checkpoint.py`.
"""

import os
import statistics
import tempfile
import time

import numpy as np

from trl_kgps import KGPSSelector
from trl_kgps import _state_file as state_file


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


if __name__ == "__main__":
    main()
