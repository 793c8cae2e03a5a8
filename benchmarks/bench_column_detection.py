"""
How long the one line takes to find its metadata columns on a Hub-sized dataset, beside reading the same columns value
by value as Python lists.

A `datasets.Dataset` of `--rows` rows shaped like a math dataset (`prompt`; `answer`, which the reward reads through
`**kwargs`; `solution`, a distinct text per row; `level`, 5 ints; `type`, 7 strings; `source`, 9 strings; `id`), its
rows shuffled and all but one selected, as a user's filter leaves them (an indices mapping over the table), and
formatted for pandas. Timed, medians of `--repeats`: `find_metadata` (what `KGPSCallback()` runs when training
starts), then `read_features` of the columns it found. The baseline, in the same run: each candidate column read value
by value (`list(dataset[column])`, which is how a lazy `datasets` column yields its values) on `--baseline_rows` rows,
scaled to `--rows`.

Run: `python benchmarks/bench_column_detection.py` (`--rows 200000`).
"""

import argparse
import statistics
import time

import numpy as np
from datasets import Dataset

from trl_kgps.adapters.dataset_columns import find_metadata, read_features
from trl_kgps.adapters.reward_reads import ColumnReaders


CANDIDATES = ["answer", "solution", "level", "type", "source", "id"]


def reward(completions, **kwargs):
    return [float(c == a) for c, a in zip(completions, kwargs["answer"])]


def math_like(rows: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    table = Dataset.from_dict(
        {
            "prompt": [f"Problem {i}: what is {i % 97} + {i % 89}?" for i in range(rows)],
            "answer": (rng.integers(0, 1000, rows)).astype(str).tolist(),
            "solution": [f"Add {i % 97} and {i % 89} to get the sum; row {i}." for i in range(rows)],
            "level": rng.integers(1, 6, rows).tolist(),
            "type": rng.choice(["Algebra", "Geometry", "Counting", "Number", "Prealgebra", "Precalc", "Inter"], rows),
            "source": rng.choice([f"source_{j}" for j in range(9)], rows).tolist(),
            "id": list(range(rows)),
        }
    )
    table = table.shuffle(seed=seed).select(range(rows - 1))
    table.set_format("pandas")
    return table


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--baseline_rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    dataset = math_like(args.rows)
    readers = ColumnReaders.of([reward])
    metadata = find_metadata(dataset, readers)
    print(metadata.describe())
    detect = median_seconds(lambda: find_metadata(dataset, readers), args.repeats)
    read = median_seconds(lambda: read_features(dataset, metadata.columns), args.repeats)

    small = math_like(args.baseline_rows)
    small.reset_format()
    baseline = median_seconds(lambda: [list(small[c]) for c in CANDIDATES], 1) * (args.rows / args.baseline_rows)

    print(f"rows: {len(dataset):,} (shuffled, selected, formatted for pandas)")
    print(f"find_metadata over {len(dataset.column_names)} columns:  {detect:8.3f} s")
    print(f"read_features of {metadata.columns}:  {read:8.3f} s")
    print(
        f"baseline, {len(CANDIDATES)} columns read value by value (measured on {args.baseline_rows:,} rows, scaled): "
        f"{baseline:8.3f} s"
    )
    print(f"ratio find_metadata / baseline: {detect / baseline:.4f}")


if __name__ == "__main__":
    main()
