"""
Time and size of the KGPS state file (`kgps_state.npz`) for large prompt pools: the selector's state written
atomically and read back, as `KGPSCallback` does in every checkpoint.

Run: `python benchmarks/bench_checkpoint.py`.
"""

import os
import statistics
import tempfile
import time

import numpy as np

from trl_kgps import KGPSSelector
from trl_kgps import _checkpoint as checkpoint


def main():
    print("| prompts | file | save | load |")
    print("|---|---|---|---|")
    for n in (1_000_000, 10_000_000):
        selector = KGPSSelector(n)
        state = selector.state_dict()
        arrays = {"mean": state["mean"], "variance_base": state["variance_base"], "observed": np.ones(n, dtype=bool)}
        meta = {"rng_state": state["rng_state"], "variance_offset": state["variance_offset"]}
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, checkpoint.STATE_FILE)
            saves, loads = [], []
            for _ in range(3):
                t0 = time.perf_counter()
                checkpoint.save(path, arrays, meta)
                saves.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                checkpoint.load(path)
                loads.append(time.perf_counter() - t0)
            size = os.path.getsize(path)
        print(
            f"| {n:.0e} | {size / 2**20:.0f} MiB | {statistics.median(saves):.2f} s | {statistics.median(loads):.2f} s |"
        )


if __name__ == "__main__":
    main()
