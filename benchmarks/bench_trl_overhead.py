"""
What KGPS adds to a training run, measured beside the same run without it.

1. A GRPO run: the same tiny model, data and seed, trained with TRL's own sampler and with `KGPSCallback`; the
   median `step_time` TRL logs, the whole run's time, their ratios, and the time spent inside KGPS's own hooks.
2. The parameter-update norm: `ParameterDelta.step()` (exact, and on a 1 % sample) against one AdamW step on
   the same float32 parameters (10M and 100M), with the memory its reference copy takes.

Run: `python benchmarks/bench_trl_overhead.py` (about two minutes on 2 CPU cores).
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from harness import WORDS, RewardLog, build_model, build_tokenizer, prompt_dataset, trainer_args  # noqa: E402

from trl_kgps import KGPSCallback  # noqa: E402
from trl_kgps._distributed import ParameterDelta  # noqa: E402


class TimedKGPS(KGPSCallback):
    """KGPSCallback that adds up the time spent in its own work: selection, observations, the delta norm."""

    seconds = 0.0

    def _timed(self, method, *args):
        t0 = time.perf_counter()
        result = method(*args)
        self.seconds += time.perf_counter() - t0
        return result

    def _on_new_batch(self, batch, lag):
        self.seconds += self.sampler.last_select_seconds
        return self._timed(super()._on_new_batch, batch, lag)

    def _observe(self, rewards_per_func, inputs):
        return self._timed(super()._observe, rewards_per_func, inputs)

    def on_optimizer_step(self, args, state, control, **kwargs):
        return self._timed(super().on_optimizer_step, args, state, control)


def grpo_run(callback, steps: int) -> tuple[list[float], float]:
    """Step times of a tiny GRPO run (completions forced to full length, so every step does the same work)."""
    from trl import GRPOTrainer

    tokenizer = build_tokenizer(WORDS)
    with tempfile.TemporaryDirectory() as out:
        args = trainer_args(out, max_steps=steps, generation_kwargs={"min_new_tokens": 4})
        trainer = GRPOTrainer(
            model=build_model(len(tokenizer)),
            reward_funcs=RewardLog(),
            args=args,
            train_dataset=prompt_dataset(64),
            processing_class=tokenizer,
            callbacks=None if callback is None else [callback],
        )
        t0 = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - t0
    times = [entry["step_time"] for entry in trainer.state.log_history if "step_time" in entry]
    return times[5:], total  # the first steps warm caches up


def delta_norm_cost(num_params: int, sample: float, repeats: int = 5) -> tuple[float, float, int]:
    param = torch.nn.Parameter(torch.randn(num_params))
    param.grad = torch.randn(num_params)
    optimizer = torch.optim.AdamW([param], lr=1e-6)
    optimizer.step()  # allocate the moments
    delta = ParameterDelta([param], sample=sample)
    delta.reset()
    adam, norm = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        optimizer.step()
        adam.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        delta.step()
        norm.append(time.perf_counter() - t0)
    snapshot_bytes = sum(s.numel() * s.element_size() for s in delta.snapshots)
    return statistics.median(norm), statistics.median(adam), snapshot_bytes


def main():
    torch.set_num_threads(2)
    steps = 60
    grpo_run(None, 10)  # warms up torch and the tokenizer, so neither measured run pays for it
    plain_times, kgps_times, totals = [], [], {"plain": 0.0, "kgps": 0.0}
    kgps_seconds = 0.0
    for _ in range(2):  # alternate, so that drift of the shared machine hits both alike
        times, total = grpo_run(None, steps)
        plain_times += times
        totals["plain"] += total
        kgps = TimedKGPS()
        times, total = grpo_run(kgps, steps)
        kgps_times += times
        totals["kgps"] += total
        kgps_seconds += kgps.seconds
    p, k = statistics.median(plain_times), statistics.median(kgps_times)
    print(f"GRPO, tiny model on CPU, 2 x {steps} steps each:")
    print(f"  median step: TRL sampler {p * 1e3:.1f} ms, KGPSCallback {k * 1e3:.1f} ms (ratio {k / p:.3f})")
    print(
        f"  whole runs:  TRL sampler {totals['plain']:.2f} s, KGPSCallback {totals['kgps']:.2f} s "
        f"(ratio {totals['kgps'] / totals['plain']:.3f})"
    )
    print(
        f"  KGPS's own work: {kgps_seconds / (2 * steps) * 1e3:.2f} ms a step, "
        f"{kgps_seconds / totals['kgps']:.1%} of the runs\n"
    )
    print("| parameters | sample | delta norm | AdamW step | norm / AdamW | reference copy |")
    print("|---|---|---|---|---|---|")
    for num_params in (10_000_000, 100_000_000):
        for sample in (1.0, 0.01):
            norm, adam, memory = delta_norm_cost(num_params, sample)
            print(
                f"| {num_params / 1e6:.0f}M | {sample:g} | {norm * 1e3:.1f} ms | {adam * 1e3:.1f} ms | "
                f"{norm / adam:.1%} | {memory / 2**20:.1f} MiB |"
            )


if __name__ == "__main__":
    main()
