"""
What KGPS adds to a training run, measured beside the same run without it, on the CPU.

1. GRPO on the tiny model of the integration tests (6k parameters): the same model, data and seed, trained with
   TRL's own sampler and with `KGPSCallback`; the median `step_time` TRL logs, the whole run's time, their ratios,
   and the time spent in KGPS's own work (selection, observations, the norm).
2. The same comparison on a 54M-parameter Qwen2 built from a config, and the memory of KGPS's reference copy
   against the trainable parameters'.
3. The parameter-update norm on that model's parameters: `ParameterDelta.step()`, exact (`delta_norm_sample=1`) and
   on the default 1 % sample, against one AdamW step on the same parameters, in float32 and bfloat16, with the time
   and bytes per tracked value that `benchmarks/delta_norm_cost_table.py` scales to 0.6B-70B models.

Run: `python benchmarks/bench_trl_overhead.py --json benchmarks/results/trl_overhead.json` (about a minute on 2 CPU
cores); `--quick` runs every part with few steps, to check that it works.
"""

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
import transformers
from realcpu.environment import environment

from trl_kgps import KGPSCallback
from trl_kgps.adapters.distributed import ParameterDelta
from trl_kgps.tasks.tiny import WORDS, grpo_config, word_model, word_prompts, word_tokenizer


def reward(prompts, completions, **kwargs):
    """A 0/1 reward fixed by the prompt and the completion, with or without KGPS."""
    return [float((len(p) + 7 * len(c)) % 3 == 0) for p, c in zip(prompts, completions)]


class TimedKGPS(KGPSCallback):
    """KGPSCallback that adds up the time spent in its own work: observations and the norm here, selection from the
    `kgps/select_ms` it logs."""

    seconds = 0.0

    def _timed(self, method, *args, **kwargs):
        t0 = time.perf_counter()
        result = method(*args, **kwargs)
        self.seconds += time.perf_counter() - t0
        return result

    def attach(self, trainer):
        # KGPS wraps `_calculate_rewards`: its own time is the wrapper's, less the reward functions' inside it.
        rewards, inside = trainer._calculate_rewards, [0.0]

        def reward_functions(*args, **kwargs):
            t0 = time.perf_counter()
            result = rewards(*args, **kwargs)
            inside[0] += time.perf_counter() - t0
            return result

        trainer._calculate_rewards = reward_functions
        super().attach(trainer)
        observe = trainer._calculate_rewards

        def timed(*args, **kwargs):
            before = inside[0]
            result = self._timed(observe, *args, **kwargs)
            self.seconds -= inside[0] - before
            return result

        trainer._calculate_rewards = timed
        return self

    def on_optimizer_step(self, args, state, control, **kwargs):
        return self._timed(super().on_optimizer_step, args, state, control)


def medium_model(tokenizer) -> torch.nn.Module:
    """A Qwen2 of 54.3M parameters (14 layers of width 576) for `tokenizer`, in float32."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=576,
        intermediate_size=1728,
        num_hidden_layers=14,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=64,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config)


def grpo_run(callback, steps: int, build=word_model, **overrides) -> tuple[list[float], float, dict]:
    """Step times of a GRPO run (completions forced to full length, so every step does the same work), the whole
    run's time, and what it leaves to measure."""
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    tokenizer = word_tokenizer(WORDS)
    completion = overrides.get("max_completion_length", 4)
    with tempfile.TemporaryDirectory() as out:
        args = grpo_config(out, max_steps=steps, generation_kwargs={"min_new_tokens": completion}, **overrides)
        trainer = GRPOTrainer(
            model=build(tokenizer),
            reward_funcs=reward,
            args=args,
            train_dataset=word_prompts(64),
            processing_class=tokenizer,
            callbacks=None if callback is None else [callback],
        )
        trainer.remove_callback(PrinterCallback)  # every step's logs: the figures below are the output
        t0 = time.perf_counter()
        trainer.train()
        total = time.perf_counter() - t0
    logs = trainer.state.log_history
    times = [entry["step_time"] for entry in logs if "step_time" in entry]
    seen = {
        "select_seconds": sum(entry.get("kgps/select_ms", 0.0) for entry in logs) / 1e3,
        "parameters": [p for p in trainer.model.parameters() if p.requires_grad],
    }
    if callback is not None:
        seen["snapshots"] = callback.adapter.delta.snapshots
    return times, total, seen


def compare(steps: int, repeats: int, skip: int, build=word_model, **overrides) -> dict:
    """TRL's sampler against KGPSCallback, alternated `repeats` times so that drift of a shared machine hits both
    alike; the first `skip` steps of each run warm caches up and are left out of the medians."""
    plain_times, kgps_times, totals, own = [], [], {"plain": 0.0, "kgps": 0.0}, 0.0
    for _ in range(repeats):
        times, total, _ = grpo_run(None, steps, build, **overrides)
        plain_times += times[skip:]
        totals["plain"] += total
        kgps = TimedKGPS()
        times, total, seen = grpo_run(kgps, steps, build, **overrides)
        kgps_times += times[skip:]
        totals["kgps"] += total
        own += kgps.seconds + seen["select_seconds"]
    parameters = seen["parameters"]
    return {
        "plain_step": statistics.median(plain_times),
        "kgps_step": statistics.median(kgps_times),
        "plain_total": totals["plain"],
        "kgps_total": totals["kgps"],
        "own_per_step": own / (repeats * steps),
        "own_share": own / totals["kgps"],
        "parameters": sum(p.numel() for p in parameters),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in parameters),
        "copy_bytes": sum(s.numel() * s.element_size() for s in seen["snapshots"]),
    }


def report_run(name: str, steps: int, repeats: int, run: dict) -> None:
    p, k = run["plain_step"], run["kgps_step"]
    size = f"{run['parameters'] / 1e6:.1f}M" if run["parameters"] >= 1e6 else f"{run['parameters'] / 1e3:.0f}k"
    print(f"GRPO, {name} ({size} parameters) on CPU, {repeats} x {steps} steps each:")
    print(f"  median step: TRL sampler {p * 1e3:.1f} ms, KGPSCallback {k * 1e3:.1f} ms (ratio {k / p:.3f})")
    print(
        f"  whole runs:  TRL sampler {run['plain_total']:.2f} s, KGPSCallback {run['kgps_total']:.2f} s "
        f"(ratio {run['kgps_total'] / run['plain_total']:.3f})"
    )
    print(f"  KGPS's own work: {run['own_per_step'] * 1e3:.2f} ms a step, {run['own_share']:.2%} of the runs")
    print(
        f"  reference copy (delta_norm_sample=0.01): {_bytes(run['copy_bytes'])}, "
        f"{run['copy_bytes'] / run['parameter_bytes']:.3%} of the trainable parameters' {_bytes(run['parameter_bytes'])}\n"
    )


def _bytes(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def norm_cost(dtype: torch.dtype, sample: float, repeats: int) -> dict:
    """`ParameterDelta.step()` on the 54M model's parameters against one AdamW step on the same parameters."""
    model = medium_model(word_tokenizer(WORDS)).to(dtype)
    parameters = list(model.parameters())
    for p in parameters:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(parameters, lr=1e-6)
    optimizer.step()  # allocates the moments
    delta = ParameterDelta(parameters, sample=sample)
    delta.reset()
    adam, norm = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        optimizer.step()
        adam.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        delta.step()
        norm.append(time.perf_counter() - t0)
    values = sum(p.numel() for p in parameters)
    tracked = sum(s.numel() for s in delta.snapshots)
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "sample": sample,
        "values": values,
        "tracked": tracked,
        "norm_seconds": statistics.median(norm),
        "adam_seconds": statistics.median(adam),
        "ns_per_tracked": statistics.median(norm) / tracked * 1e9,
        "ns_per_value_adam": statistics.median(adam) / values * 1e9,
        "bytes_per_tracked": sum(s.numel() * s.element_size() for s in delta.snapshots) / tracked,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few steps and repeats: checks that every part runs")
    parser.add_argument("--json", help="also write every figure, and the per-value constants, to this file")
    cli = parser.parse_args()
    # TRL 1.16 reads transformers 5's renamed gradient-checkpointing attributes, which warns on every access
    warnings.filterwarnings("ignore", ".*is deprecated and will be removed in v6", FutureWarning)
    transformers.logging.set_verbosity_error()  # the tokenizer's notice on every model built
    torch.set_num_threads(2)
    tiny_steps, medium_steps, repeats = (8, 3, 1) if cli.quick else (60, 12, 2)
    results = {"environment": environment()}

    grpo_run(None, 4 if cli.quick else 10)  # warms up torch and the tokenizer, so neither measured run pays for it
    results["tiny"] = compare(tiny_steps, repeats, skip=5 if tiny_steps > 10 else 1)
    report_run("tiny model", tiny_steps, repeats, results["tiny"])

    # Completions of 16 tokens at lr 1e-5: every step generates, scores and updates all 54M parameters.
    medium = dict(max_completion_length=16, learning_rate=1e-5)
    results["medium"] = compare(medium_steps, repeats, skip=2 if medium_steps > 3 else 1, build=medium_model, **medium)
    report_run("Qwen2 of 14 layers", medium_steps, repeats, results["medium"])

    print("Parameter-update norm on the 54M model's parameters, against an AdamW step on them:\n")
    print("| dtype | sample | tracked values | delta norm | AdamW step | norm / AdamW | ns per tracked value | copy |")
    print("|---|---|---|---|---|---|---|---|")
    results["norm"] = []
    for dtype in (torch.float32, torch.bfloat16):
        for sample in (1.0, 0.01):
            cost = norm_cost(dtype, sample, repeats=3 if cli.quick else 7)
            results["norm"].append(cost)
            print(
                f"| {cost['dtype']} | {sample:g} | {cost['tracked'] / 1e6:.3g}M | {cost['norm_seconds'] * 1e3:.2f} ms | "
                f"{cost['adam_seconds'] * 1e3:.1f} ms | {cost['norm_seconds'] / cost['adam_seconds']:.2%} | "
                f"{cost['ns_per_tracked']:.2f} | {cost['tracked'] * cost['bytes_per_tracked'] / 2**20:.2f} MiB |"
            )
    if cli.json:
        Path(cli.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
