"""
What `KGPSCallback()` adds to the start of a `train()` and to its first checkpoint on a large dataset, beside the same
run with TRL's own sampler, on the CPU.

A `datasets.Dataset` of `--rows` rows shaped like a math dataset: `prompt`, a text per problem; `answer`, which the
reward reads; `level` (5 ints), `type` (7 strings) and `source` (9 strings), the three columns the one line finds and
shares by. Each problem is on `--copies` rows (the same prompt, answer and labels), and the rows are shuffled and all
but one selected, as a user's filter leaves them (an indices mapping over the table). GRPO on the tiny model of the
integration tests (6k parameters) trains one step, alternately with TRL's sampler and with `KGPSCallback()`, medians
of `--repeats`:

1. `train()` without a checkpoint: the one line's start-up (numbering the distinct prompts, finding the columns,
   reading them, building the selector's groups, the sampler's first epoch) is the difference;
2. `train()` saving a checkpoint at its step: the first checkpoint's extra is the difference less (1)'s, and is timed
   inside the run too: KGPS's save (`kgps_state.npz`, the digest of the dataset's rows included), and the digest alone;
3. each part of the start-up called by itself on the same dataset;
4. the peak memory of each `train()` with its checkpoint, in a process of its own (`VmHWM` less the memory before
   `train()`, Linux), the dataset memory-mapped from disk; medians of `--repeats` processes.

With `--shapes`, instead: the start-up's parts that read the prompts (`find_copies`, `with_metadata`) and the first
save's digest, in CPU seconds, for prompts written as text, as conversations (`[{"role": "system", ...}, {"role":
"user", ...}]`) and as conversations whose messages carry a key that is `None` on every row (`"name"`), on 200,000 and
`--rows` rows, in the table's order and shuffled (an indices mapping over every row), each dataset saved to disk and
memory-mapped back (in chunks of 1,000 rows, as `datasets` stores a download); each figure with its ratio to the text
prompts' of the same rows and order, measured in the same run, the shapes taking turns.

Run: `python benchmarks/bench_startup.py` (two minutes on 2 CPU cores; defaults `--rows 1000000 --copies 1
--repeats 3`); `python benchmarks/bench_startup.py --shapes` (five minutes).
"""

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import datasets
import numpy as np
import transformers
from datasets import Dataset, load_from_disk

from trl_kgps import KGPSCallback, KGPSConfig
from trl_kgps.adapters.dataset_columns import selector_for, with_metadata
from trl_kgps.adapters.dataset_copies import find_copies
from trl_kgps.adapters.reward_reads import ColumnReaders
from trl_kgps.engine.prompts_digest import prompts_digest
from trl_kgps.tasks.tiny import WORDS, grpo_config, word_model, word_tokenizer


TYPES = ["Algebra", "Geometry", "Counting", "Number", "Prealgebra", "Precalculus", "Intermediate"]
SHAPES = ("text", "conversation", "conversation, 'name' None")
SYSTEM = "Solve the problem. Put the final answer after 'Answer:'."


def reward(completions, answer, **kwargs):
    """A 0/1 reward that reads the `answer` column, so the one line never shares by it."""
    return [float(len(c) % 3 == int(a) % 3) for c, a in zip(completions, answer)]


def math_like(rows: int, copies: int, seed: int = 0) -> Dataset:
    """`rows` rows of `rows // copies` problems (the last ones fewer), shuffled, all but one selected."""
    return math_table(rows, copies, seed).shuffle(seed=seed).select(range(rows - 1))


def math_table(rows: int, copies: int, seed: int = 0, shape: str = "text") -> Dataset:
    """`rows` rows of `rows // copies` problems in order, each prompt written in `shape` (`SHAPES`)."""
    rng = np.random.default_rng(seed)
    problems = -(-rows // copies)
    problem = np.arange(rows) // copies  # each row's problem
    a, b = rng.integers(0, 1000, problems), rng.integers(0, 1000, problems)
    texts = [f"p{k % 64} a b: problem {k}, what is {a[k]} + {b[k]}? Answer with a number." for k in problem]
    if shape != "text":
        name = {"name": None} if shape != "conversation" else {}
        system = {"role": "system", "content": SYSTEM, **name}
        texts = [[system, {"role": "user", "content": text, **name}] for text in texts]
    return Dataset.from_dict(
        {
            "prompt": texts,
            "answer": (a + b)[problem].astype(str).tolist(),
            "level": rng.integers(1, 6, problems)[problem].tolist(),
            "type": rng.choice(TYPES, problems)[problem].tolist(),
            "source": rng.choice([f"source_{j}" for j in range(9)], problems)[problem].tolist(),
        }
    )


class TimedKGPS(KGPSCallback):
    """KGPSCallback that times its saves (the state file, the rows digest included) and its rows digest."""

    def attach(self, trainer):
        super().attach(trainer)
        self.seconds = {"save": 0.0, "digest": 0.0}
        adapter = self.adapter
        adapter.save, adapter.prompts_digest = (
            self._timed("save", adapter.save),
            self._timed("digest", adapter.prompts_digest),
        )
        return self

    def _timed(self, part, method):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            result = method(*args, **kwargs)
            self.seconds[part] += time.perf_counter() - t0
            return result

        return timed


def train_once(dataset, kgps: bool, save: bool) -> tuple[float, dict]:
    """One GRPO step on `dataset`: the seconds `train()` took, and KGPS's timed parts."""
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    tokenizer = word_tokenizer(WORDS)
    callback = TimedKGPS() if kgps else None
    with tempfile.TemporaryDirectory() as out:
        saving = {"save_strategy": "steps", "save_steps": 1} if save else {}
        trainer = GRPOTrainer(
            model=word_model(tokenizer),
            reward_funcs=reward,
            args=grpo_config(out, max_steps=1, **saving),
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=None if callback is None else [callback],
        )
        trainer.remove_callback(PrinterCallback)
        t0 = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - t0
    return seconds, {} if callback is None else dict(callback.seconds)


def median_seconds(fn, repeats: int) -> tuple[float, float]:
    """Medians of the wall-clock and the CPU seconds `fn()` takes: on a shared machine, the CPU time is what it
    would take alone."""
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def parts(dataset, repeats: int) -> dict[str, tuple[float, float]]:
    """Each part of the one line's start-up and of its first save, called by itself as `train()` calls it."""
    readers, config, layout = ColumnReaders.of([reward]), KGPSConfig(), grpo_config(tempfile.gettempdir())
    batch_size = layout.generation_batch_size // layout.num_generations  # prompts per generation batch
    copies, _ = find_copies(dataset, config.prompt_key, batch_size, readers)
    found, _ = with_metadata(dataset, config, readers)
    return {
        "numbering the distinct prompts (find_copies)": median_seconds(
            lambda: find_copies(dataset, config.prompt_key, batch_size, readers), repeats
        ),
        "finding the columns (with_metadata)": median_seconds(
            lambda: with_metadata(dataset, config, readers), repeats
        ),
        "reading them, building the selector (selector_for)": median_seconds(
            lambda: selector_for("kgps", dataset, found, 0, copies.first_row), repeats
        ),
        "the rows digest (prompts_digest)": median_seconds(lambda: prompts_digest(dataset), repeats),
    }


def shapes(sizes: list[int], repeats: int) -> list[dict]:
    """
    The CPU seconds of the parts that read the prompts (`find_copies`, `with_metadata`, `prompts_digest`), for each
    size, order and prompt shape; medians of `repeats`, the shapes taking turns within each repeat, so that the
    ratios hold on a machine whose load varies.
    """
    readers, config, layout = ColumnReaders.of([reward]), KGPSConfig(), grpo_config(tempfile.gettempdir())
    batch_size = layout.generation_batch_size // layout.num_generations
    calls = {
        "copies": lambda dataset: find_copies(dataset, config.prompt_key, batch_size, readers),
        "metadata": lambda dataset: with_metadata(dataset, config, readers),
        "digest": prompts_digest,
    }
    figures = []
    for rows in sizes:
        with contextlib.ExitStack() as stack:
            stored = {}
            for shape in SHAPES:
                folder = stack.enter_context(tempfile.TemporaryDirectory())
                math_table(rows, 1, shape=shape).save_to_disk(folder)
                stored[shape] = load_from_disk(folder)  # memory-mapped, in chunks of 1,000 rows
            for order in ("in order", "shuffled"):
                datasets_ = {shape: d if order == "in order" else d.shuffle(seed=0) for shape, d in stored.items()}
                cpu = {(shape, part): [] for shape in SHAPES for part in calls}
                for _ in range(repeats):
                    for shape, part in cpu:
                        cpu[shape, part].append(median_seconds(lambda f=calls[part], d=datasets_[shape]: f(d), 1)[1])
                for shape in SHAPES:
                    median = {part: statistics.median(cpu[shape, part]) for part in calls}
                    median["start-up"] = median["copies"] + median["metadata"]
                    figures.append({"rows": rows, "shape": shape, "order": order, "cpu": median})
    return figures


def print_shapes(figures: list[dict], repeats: int) -> None:
    columns = ("copies", "metadata", "start-up", "digest")
    with open("/proc/cpuinfo") as f:  # Linux
        processor = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    print(f"{processor}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the end")
    print(
        f"CPU seconds, medians of {repeats} (the ratio to text prompts of the same rows and order): copies = "
        "find_copies, metadata = with_metadata, start-up = both, digest = prompts_digest (the first save's)"
    )
    print(f"{'rows':>9}  {'order':8}  {'prompt':26}" + "".join(f"  {name:>14}" for name in columns))
    text = {(f["rows"], f["order"]): f["cpu"] for f in figures if f["shape"] == "text"}
    for f in figures:
        base = text[f["rows"], f["order"]]
        cells = "".join(f"  {f['cpu'][name]:6.3f} ({f['cpu'][name] / base[name]:4.1f}x)" for name in columns)
        print(f"{f['rows']:>9,}  {f['order']:8}  {f['shape']:26}{cells}")


def peak_memory(path: str, kgps: bool) -> int:
    """Bytes by which a one-step `train()` with its checkpoint raised the peak resident memory of a fresh process."""
    command = [sys.executable, __file__, "--memory_of", path] + (["--kgps"] if kgps else [])
    return int(subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()[-1])


def memory_child(path: str, kgps: bool) -> None:
    def status(field: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

    dataset = load_from_disk(path).shuffle(seed=0)  # memory-mapped, read through an indices mapping
    train_once(dataset.select(range(64)), kgps, save=False)  # imports and torch's first step, outside the peak
    before = status("VmRSS")
    train_once(dataset, kgps, save=True)
    print(status("VmHWM") - before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--copies", type=int, default=1, help="rows per distinct problem (the same prompt and answer)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write every figure to this file")
    parser.add_argument(
        "--shapes", action="store_true", help="only the parts that read the prompts, by prompt (text, conversation)"
    )
    parser.add_argument("--memory_of", help=argparse.SUPPRESS)
    parser.add_argument("--kgps", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    # TRL 1.16 reads transformers 5's renamed gradient-checkpointing attributes, which warns on every access
    warnings.filterwarnings("ignore", ".*is deprecated and will be removed in v6", FutureWarning)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # "Writing model shards" at every checkpoint
    datasets.disable_progress_bars()
    logging.getLogger("trl_kgps").setLevel(logging.ERROR)  # the columns found, at every run: printed once below
    if args.memory_of:
        memory_child(args.memory_of, args.kgps)
        return
    if args.shapes:
        figures = shapes(sorted({200_000, args.rows}), args.repeats)
        print_shapes(figures, args.repeats)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"args": vars(args), "shapes": figures}, f, indent=1)
        return

    t0 = time.perf_counter()
    dataset = math_like(args.rows, args.copies)
    print(
        f"{len(dataset):,} rows, {-(-args.rows // args.copies):,} problems ({args.copies} row"
        f"{'s' * (args.copies > 1)} each), shuffled and selected; built in {time.perf_counter() - t0:.1f} s"
    )
    print(with_metadata(dataset, KGPSConfig(), ColumnReaders.of([reward]))[1].describe())
    train_once(dataset.select(range(64)), kgps=True, save=True)  # imports, torch's first step
    runs = {key: [] for key in ("plain", "kgps", "plain_saved", "kgps_saved", "save", "digest")}
    for _ in range(args.repeats):
        runs["plain"].append(train_once(dataset, kgps=False, save=False)[0])
        runs["kgps"].append(train_once(dataset, kgps=True, save=False)[0])
        runs["plain_saved"].append(train_once(dataset, kgps=False, save=True)[0])
        seconds, inside = train_once(dataset, kgps=True, save=True)
        runs["kgps_saved"].append(seconds)
        runs["save"].append(inside["save"])
        runs["digest"].append(inside["digest"])
    median = {key: statistics.median(values) for key, values in runs.items()}
    checkpoint = median["kgps_saved"] - median["plain_saved"] - (median["kgps"] - median["plain"])

    print(f"\none-step train(), medians of {args.repeats}, seconds: TRL's sampler | KGPSCallback() | added | ratio")
    for name, plain, kgps in (("", "plain", "kgps"), (", saving one checkpoint", "plain_saved", "kgps_saved")):
        p, k = median[plain], median[kgps]
        print(f"  train(){name}: {p:.2f} | {k:.2f} | {k - p:+.2f} | {k / p:.2f}")
    print(f"  the first checkpoint's extra (the second difference less the first): {checkpoint:+.2f}")
    print(f"  timed inside the run: KGPS's save {median['save']:.2f}, of which the rows digest {median['digest']:.2f}")

    print(f"\nthe parts, each called by itself, medians of {args.repeats}: wall-clock (CPU) seconds")
    split = parts(dataset, args.repeats)
    for name, (wall, cpu) in split.items():
        print(f"  {name}: {wall:.3f} ({cpu:.3f})")

    with tempfile.TemporaryDirectory() as folder:
        dataset.save_to_disk(folder)
        memory = {"plain": [], "kgps": []}
        for _ in range(args.repeats):
            memory["plain"].append(peak_memory(folder, kgps=False))
            memory["kgps"].append(peak_memory(folder, kgps=True))
    plain, kgps = (statistics.median(memory[key]) / 2**20 for key in ("plain", "kgps"))
    print(
        f"\npeak memory of train() with one checkpoint above the memory before it, medians of {args.repeats} "
        f"processes: TRL's sampler {plain:.0f} MiB, KGPSCallback() {kgps:.0f} MiB (added {kgps - plain:+.0f} MiB for "
        f"{len(dataset):,} rows; KGPS's runs {min(memory['kgps']) / 2**20:.0f}-{max(memory['kgps']) / 2**20:.0f} MiB)"
    )
    if args.json:
        figures = {"args": vars(args), "runs": runs, "median": median, "parts": split, "memory": memory}
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
