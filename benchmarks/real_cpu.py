"""
A real learning benchmark on CPU: which prompt selector makes a real policy learn most per rollout?

A small Qwen2 (built from a config, character tokenizer) is warmed up once on sums whose supervised answers are right
only part of the time, at a rate set by the difficulty level (`trl_kgps.tasks.sharpening`): it solves level 1,
sometimes solves levels 2 and 3, and has never seen level 4. RL can sharpen a lot, and a pool spread evenly over the
levels makes about half of a uniform sampler's GRPO groups unanimous (all right or all wrong), so choosing prompts
well can matter. From that one warm start, each method trains with the real `GRPOTrainer` at the same rollout
budget, for several seeds: uniform (TRL's order), KGPS (the paper's), MoPPS, GRESO, DAPO-style dynamic sampling
(DS, which spends extra rollouts to screen), and an `oracle` that knows every training prompt's current success
rate and trains on the prompts likely to give a mixed group (drawn in proportion to that chance; `oracle_greedy`
takes the most likely): the ceiling of prompt selection here.

Success rates are exact, not sampled: a prompt's success rate under GRPO's sampling is the probability of the
completion `answer<eos>`, one teacher-forced forward pass (`answer_probabilities`). So the held-out accuracy
(1,024 prompts never seen in the warm start or in RL) and every training prompt's true success are measured
without sampling noise, and cost no rollouts. Every `--snapshot_every` steps the run records them with every
selector's predicted success.

```bash
python benchmarks/real_cpu.py                      # the committed results: 7 methods x seeds 0,1,2, 11 min on 2 cores
python benchmarks/real_cpu.py --seeds 3,4,5 --out benchmarks/results/heldback   # seeds no choice was tuned on
python benchmarks/real_cpu.py --methods kgps,uniform --seeds 0 --out /tmp/quick   # a minute
python benchmarks/real_cpu.py --paper --out results_math   # the paper's Qwen3-0.6B / MATH setting, on a GPU
```

Writes into `--out`: `real_cpu.json` (per method and seed: the curves and a summary), `real_cpu.md` (the table),
`real_cpu_accuracy_vs_rollouts.png` (the paper's Fig. 1a, mean and band over seeds), `real_cpu_batch_mae.png`
(Fig. 1b: predicted against empirical `s/k` of each selected batch), `real_cpu_mae_vs_true.png` (predicted against
true success, every prompt) and `real_cpu_trajectories.parquet` (method, seed, step, rollouts, prompt, level, true
and predicted success).

DS is emulated outside the trainer: before each batch, candidates from a uniform stream are rolled out by the
current policy (`num_generations` sampled completions each) and kept when their group is mixed (`0 < s < k`); the
kept prompts then train. Every candidate's rollouts count towards DS's budget (real DS trains on the kept ones, so
the trainer's own rollouts of them are not counted twice).
"""

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from transformers import TrainerCallback


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trl_kgps import KGPSCallback, KGPSConfig  # noqa: E402
from trl_kgps._plots import pyplot  # noqa: E402
from trl_kgps.simulator import oracle_batch  # noqa: E402
from trl_kgps.tasks import arithmetic, sharpening, tiny  # noqa: E402
from trl_kgps.tasks.evaluation import answer_probabilities, success_rates  # noqa: E402
from trl_kgps.variants import VARIANTS  # noqa: E402


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
METHODS = ("uniform", "kgps", "kgps_paper", "mopps", "greso", "ds", "oracle", "oracle_greedy")
BASELINE = "uniform"


@dataclass
class Setting:
    """The policy, the data, the reward and the GRPO arguments of one benchmark setting."""

    model: object
    tokenizer: object
    train: object  # datasets.Dataset with "prompt" and the reward's columns
    test: object
    reward: object
    columns: tuple[str, ...]  # dataset columns the reward reads
    grpo: dict
    max_new_tokens: int
    # true_success(model, dataset, seed): each prompt's success rate under the model (exact, or sampled)
    true_success: Callable


def cpu_setting(args) -> Setting:
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, seed=0)
    warm_examples = args.warm_start_steps * 64  # a fresh example for every row of every warm-start batch
    train, test, warm = sharpening.make_splits(args.num_prompts, args.num_eval_prompts, warm_examples, seed=0)
    tiny.warm_start(model, tokenizer, warm["prompt"], warm["answer"], args.warm_start_steps)
    grpo = dict(
        use_cpu=True,
        bf16=False,
        max_completion_length=4,  # the longest answer (3 digits) and <eos>
        learning_rate=args.learning_rate or 1e-4,
        warmup_steps=args.lr_warmup_steps,
    )

    def exact(model, dataset, seed):
        return answer_probabilities(model, tokenizer, dataset["prompt"], dataset["answer"])

    return Setting(model, tokenizer, train, test, arithmetic.arithmetic_reward, ("answer",), grpo, 4, exact)


def paper_setting(args) -> Setting:
    """Qwen3-0.6B on MATH with the math-verify accuracy reward, the paper's hyperparameters (a GPU is needed)."""
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_kgps.train import accuracy_reward  # math-verify, for the snapshots' plain-text completions too

    name = "Qwen/Qwen3-0.6B"
    tokenizer = AutoTokenizer.from_pretrained(name, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.bfloat16).cuda()
    suffix = " Please reason step by step, and put your final answer within \\boxed{}."

    def conversational(example):
        return {"prompt": [{"role": "user", "content": example["problem"] + suffix}]}

    data = load_dataset("DigitalLearningGmbH/MATH-lighteval").map(conversational)
    train = data["train"].shuffle(seed=0).select(range(args.num_prompts))
    test = data["test"].shuffle(seed=0).select(range(args.num_eval_prompts))
    grpo = dict(bf16=True, max_completion_length=4096, learning_rate=args.learning_rate or 1e-6)
    setting = Setting(model, tokenizer, train, test, accuracy_reward, ("solution",), grpo, 4096, None)

    def sampled(model, dataset, seed):
        return _sampled_success(setting, model, dataset, args.true_samples, seed)

    setting.true_success = sampled
    return setting


def _sampled_success(setting: Setting, model, dataset, samples: int, seed: int) -> np.ndarray:
    """The share of `samples` sampled completions of each of `dataset`'s prompts that the reward accepts."""
    columns = {name: dataset[name] for name in setting.columns}
    return success_rates(
        model, setting.tokenizer, dataset["prompt"], setting.reward, columns, samples=samples,
        max_new_tokens=setting.max_new_tokens, seed=seed,
    )  # fmt: skip


class _BenchmarkSelector:
    """What the benchmark-only selectors share: no checkpoints, no use for the update norm."""

    def initialize(self, indices, successes, trials) -> None:
        self.update(indices, successes, trials)

    def predict(self, delta_norm) -> None:
        pass

    def state_dict(self) -> dict:
        raise NotImplementedError(f"the benchmark's {type(self).__name__} is not checkpointed")

    def load_state_dict(self, state) -> None:
        raise NotImplementedError(f"the benchmark's {type(self).__name__} is not checkpointed")


class Oracle(_BenchmarkSelector):
    r"""
    The ceiling of prompt selection here: it knows every training prompt's current success rate `p` (`truth()`,
    exact, re-measured every `refresh` batches, never counted as rollouts) and trains on the prompts most likely to
    give a mixed group of `G` rollouts, \(u = 1 - p^G - (1 - p)^G\).

    `rule="proportional"` (the `oracle` method) draws `B` distinct prompts with probabilities proportional to `u`
    (`trl_kgps.simulator.oracle_batch`, the simulator's oracles' rule), which is the training distribution of DAPO's
    dynamic sampling without its screening rollouts. `rule="greedy"` (`oracle_greedy`) takes the `B` largest `u`, ties in random order: it never revisits
    the prompts it has solved, and measured here they are forgotten (docs/benchmarks.md). Neither needs a warmup.
    """

    def __init__(
        self, num_prompts: int, truth: Callable[[], np.ndarray], group_size: int, refresh: int, seed: int, rule: str
    ):
        self.num_prompts, self.truth, self.group_size, self.refresh, self.rule = (
            num_prompts, truth, group_size, refresh, rule
        )  # fmt: skip
        self.rng = np.random.default_rng(seed)
        self.selections = 0
        self.p = np.full(num_prompts, 0.5)

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        if self.selections % self.refresh == 0:
            self.p = self.truth()
        self.selections += 1
        return oracle_batch(self.p, self.group_size, batch_size, self.rng, self.rule == "greedy", exclude)

    def update(self, indices, successes, trials) -> None:
        pass

    def predicted_success(self, indices=None) -> np.ndarray:
        return self.p.copy() if indices is None else self.p[np.asarray(indices)]


class DynamicSampling(_BenchmarkSelector):
    """
    DAPO's dynamic sampling as a prompt selector: candidates from a seeded uniform stream are rolled out by the
    current policy (`screen(indices)` returns their sampled success rates) and kept when their group is mixed, until
    `batch_size` are kept (at most `max_candidates` candidates per batch; the last ones screened fill a batch that
    falls short). `screened` counts every candidate rolled out.
    """

    def __init__(self, num_prompts: int, screen, seed: int, max_candidates: int = 256):
        self.num_prompts, self.screen = num_prompts, screen
        self.rng = np.random.default_rng(seed)
        self.max_candidates = max_candidates
        self.stream: list[int] = []
        self.screened = 0
        self.last = np.full(num_prompts, 0.5)

    def _candidates(self, count: int, exclude: set) -> list[int]:
        picked = []
        while len(picked) < count:
            if not self.stream:
                self.stream = self.rng.permutation(self.num_prompts).tolist()
            index = self.stream.pop()
            if index not in exclude:
                picked.append(index)
        return picked

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        excluded = set() if exclude is None else set(np.asarray(exclude).tolist())
        kept, rejected = [], []
        while len(kept) < batch_size and len(kept) + len(rejected) < self.max_candidates:
            candidates = self._candidates(batch_size, excluded | set(kept) | set(rejected))
            rates = self.screen(candidates)
            self.screened += len(candidates)
            for index, rate in zip(candidates, rates):
                self.last[index] = rate
                mixed = 0 < rate < 1
                (kept if mixed else rejected).append(index)
        return np.array((kept + rejected)[:batch_size])

    def update(self, indices, successes, trials) -> None:
        trials = np.asarray(trials)
        seen = trials > 0
        self.last[np.asarray(indices)[seen]] = np.asarray(successes)[seen] / trials[seen]

    def predicted_success(self, indices=None) -> np.ndarray:
        return self.last.copy() if indices is None else self.last[np.asarray(indices)]


class Snapshots(TrainerCallback):
    """Every `every` steps (and before the first): true success of every training prompt, held-out accuracy, and
    the selector's predicted success."""

    def __init__(self, setting: Setting, kgps: KGPSCallback, args, extra_rollouts=lambda: 0):
        self.setting, self.kgps, self.args, self.extra_rollouts = setting, kgps, args, extra_rollouts
        self.records = []

    def take(self, model, step: int) -> None:
        setting = self.setting
        self.records.append(
            dict(
                step=step,
                rollouts=self.kgps.rollouts + self.extra_rollouts(),
                true=setting.true_success(model, setting.train, 10_000 + step),
                heldout=float(setting.true_success(model, setting.test, 20_000 + step).mean()),
                # Before the warmup ends a selector has no prediction of its own.
                predicted=None if self.kgps.in_warmup else np.asarray(self.kgps.selector.predicted_success(), float),
            )
        )

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.take(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.args.snapshot_every == 0:
            self.take(model, state.global_step)


def run(setting: Setting, method: str, seed: int, args) -> dict:
    from trl import GRPOConfig, GRPOTrainer

    model = copy.deepcopy(setting.model)
    G = args.num_generations
    selector, config = method, KGPSConfig()
    if method in VARIANTS:
        selector, config = "kgps", VARIANTS[method]
    elif method == "ds":

        def screen(indices):
            sample_seed = int(selector.rng.integers(2**31))
            return _sampled_success(setting, model, setting.train.select(indices), G, seed=sample_seed)

        selector = DynamicSampling(len(setting.train), screen, seed)
    elif method.startswith("oracle"):
        rule = "greedy" if method == "oracle_greedy" else "proportional"
        truth = lambda: setting.true_success(model, setting.train, 0)  # noqa: E731
        selector = Oracle(len(setting.train), truth, G, args.oracle_refresh, seed, rule)
        config = KGPSConfig(warmup_epochs=0)
    kgps = KGPSCallback(config, selector=selector)

    snapshots = Snapshots(setting, kgps, args, extra_rollouts=lambda: _ds_extra(method, selector, kgps, G))
    training_args = GRPOConfig(
        output_dir=os.path.join(tempfile.gettempdir(), "trl-kgps-real-cpu", f"{method}-{seed}"),  # nothing saved
        report_to="none",
        per_device_train_batch_size=args.prompts_per_step * G,
        num_generations=G,
        max_steps=args.steps,
        logging_steps=1,
        save_strategy="no",
        seed=seed,
        disable_tqdm=True,
        log_level="error",
        **setting.grpo,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=setting.reward,
        args=training_args,
        train_dataset=setting.train,
        processing_class=setting.tokenizer,
        callbacks=[kgps, snapshots],
    )
    _quiet(trainer)
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    if args.steps % args.snapshot_every:
        snapshots.take(trainer.model, args.steps)
    logged = trainer.state.log_history
    warmup_steps = kgps.sampler.warmup_batches
    after_warmup = [r for r in logged if r.get("step", 0) > warmup_steps]
    # Every prompt is chosen once by each warmup epoch: more than that, and a selector chose it afterwards.
    distinct = int(np.count_nonzero(kgps.sampler.times_selected > kgps.config.warmup_epochs))
    return dict(
        records=snapshots.records,
        wall_s=wall,
        informative_share=_mean(after_warmup, "kgps/informative"),
        spearman=_mean(after_warmup, "kgps/spearman"),
        batch_mae=[(r["step"], r["kgps/mae"]) for r in after_warmup if "kgps/mae" in r],
        distinct_prompts=distinct,
    )


def _quiet(trainer) -> None:
    """No per-step metric dicts on stdout: the benchmark prints one line per run."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)


def _ds_extra(method: str, selector, kgps: KGPSCallback, G: int) -> int:
    """DS's rollouts beyond the trainer's: candidates screened, minus those kept and trained on (counted once)."""
    if method != "ds":
        return 0
    trained_by_selector = max(0, kgps.sampler.batches_chosen - kgps.sampler.warmup_batches) * kgps.sampler.batch_size
    return (selector.screened - trained_by_selector) * G


def _mean(records: list[dict], key: str) -> float:
    values = [r[key] for r in records if key in r]
    return float(np.mean(values)) if values else float("nan")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated, among %(default)s")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated training seeds (default %(default)s)")
    parser.add_argument("--steps", type=int, default=400, help="GRPO steps per run (default %(default)s)")
    parser.add_argument("--snapshot_every", type=int, default=20)
    parser.add_argument("--num_prompts", type=int, default=512, help="RL pool size (default %(default)s)")
    parser.add_argument("--num_eval_prompts", type=int, default=1024, help="held-out prompts (default %(default)s)")
    parser.add_argument("--prompts_per_step", type=int, default=4)
    parser.add_argument("--num_generations", type=int, default=8)
    parser.add_argument("--true_samples", type=int, default=16, help="--paper only: samples per true success rate")
    parser.add_argument("--warm_start_steps", type=int, default=2500)
    parser.add_argument("--learning_rate", type=float, default=None)
    parser.add_argument("--lr_warmup_steps", type=int, default=10)
    parser.add_argument("--oracle_refresh", type=int, default=1, help="batches between the oracle's measurements")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch CPU threads (default %(default)s: as fast as 2 for this model, and not slowed down many times "
        "over when another process shares the cores)",
    )  # fmt: skip
    parser.add_argument("--paper", action="store_true", help="Qwen3-0.6B on MATH (GPU)")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--report_only", action="store_true", help="rewrite the table and plots from real_cpu.json")
    parser.add_argument(
        "--summary_only", action="store_true", help="write real_cpu.json and real_cpu.md only (no plots, no parquet)"
    )
    args = parser.parse_args(argv)
    if args.report_only:
        with open(os.path.join(args.out, "real_cpu.json")) as f:
            results = json.load(f)
        results["summary"], results["paired"] = _summarize(results["runs"]), paired(results)
        _report(results, args.out)
        return
    methods = args.methods.split(",")
    unknown = sorted(set(methods) - set(METHODS) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"--methods: unknown {unknown}; choose among {list(METHODS)}.")
    try:
        seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        raise SystemExit(f"--seeds must be comma-separated integers such as 0,1,2, got {args.seeds!r}.") from None
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    start = time.perf_counter()
    setting = paper_setting(args) if args.paper else cpu_setting(args)
    results = {"config": vars(args), "runs": {}}
    trajectories = []
    for method in methods:
        results["runs"][method] = {}
        for seed in seeds:
            outcome = run(setting, method, seed, args)
            results["runs"][method][str(seed)] = _curves(outcome)
            if not args.summary_only:  # the parquet's rows, which --summary_only does not write
                trajectories += _rows(outcome, method, seed, setting.train)
            summary = results["runs"][method][str(seed)]["summary"]
            print(
                f"{method} seed {seed}: held-out {summary['final_heldout_accuracy']:.3f}, unanimous "
                f"{summary['unanimous_share']:.2f}, {summary['wall_s']:.0f} s",
                flush=True,
            )
    results["wall_s"] = time.perf_counter() - start
    results["summary"] = _summarize(results["runs"])
    results["paired"] = paired(results)
    _write(results, None if args.summary_only else trajectories, args.out)


def _curves(outcome: dict) -> dict:
    records = outcome["records"]
    mae = [float(np.abs(r["predicted"] - r["true"]).mean()) if r["predicted"] is not None else None for r in records]
    steps = [r["step"] for r in records]
    # The paper's Fig. 1b: |predicted - s/k| over each selected batch, averaged between consecutive snapshots.
    batch_mae = []
    for previous, step in zip([-1] + steps[:-1], steps):
        window = [value for logged_step, value in outcome["batch_mae"] if previous < logged_step <= step]
        batch_mae.append(float(np.mean(window)) if window else None)
    curves = dict(
        steps=steps,
        rollouts=[r["rollouts"] for r in records],
        heldout_accuracy=[r["heldout"] for r in records],
        train_true_success=[float(r["true"].mean()) for r in records],
        mae_vs_true=mae,
        batch_mae=batch_mae,
    )
    estimated = [m for m in mae if m is not None]
    curves["summary"] = dict(
        final_heldout_accuracy=curves["heldout_accuracy"][-1],
        heldout_gain=curves["heldout_accuracy"][-1] - curves["heldout_accuracy"][0],
        final_train_success=curves["train_true_success"][-1],
        rollouts=curves["rollouts"][-1],
        unanimous_share=1.0 - outcome["informative_share"],
        mae_vs_true=float(np.mean(estimated)) if estimated else None,
        batch_mae=float(np.mean([value for _, value in outcome["batch_mae"]])) if outcome["batch_mae"] else None,
        spearman=outcome["spearman"],
        distinct_prompts=outcome.get("distinct_prompts"),
        wall_s=outcome["wall_s"],
    )
    return curves


def _rows(outcome: dict, method: str, seed: int, train) -> list[dict]:
    levels = train["level"] if "level" in train.column_names else [None] * len(train)
    rows = []
    for r in outcome["records"]:
        predicted = r["predicted"] if r["predicted"] is not None else np.full(len(train), np.nan)
        for index in range(len(train)):
            rows.append(
                dict(
                    method=method,
                    seed=seed,
                    step=r["step"],
                    rollouts=r["rollouts"],
                    prompt_index=index,
                    level=levels[index],
                    true_success=float(r["true"][index]),
                    predicted_success=float(predicted[index]),
                )  # fmt: skip
            )
    return rows


def rollouts_to_reach(rollouts, accuracy, target: float) -> float:
    """
    The rollouts at which the accuracy-vs-rollouts curve first reaches `target`, linearly interpolated between
    snapshots; `inf` if it never does.
    """
    rollouts, accuracy = np.asarray(rollouts, float), np.asarray(accuracy, float)
    reached = np.flatnonzero(accuracy >= target)
    if not reached.size:
        return float("inf")
    i = int(reached[0])
    if i == 0:
        return float(rollouts[0])
    fraction = (target - accuracy[i - 1]) / (accuracy[i] - accuracy[i - 1])
    return float(rollouts[i - 1] + fraction * (rollouts[i] - rollouts[i - 1]))


def paired(results: dict, baseline: str = BASELINE) -> dict:
    """
    Per method, over the seeds it shares with `baseline`: the final held-out accuracy minus the baseline's in the
    run with the same seed, and the rollouts it needed to reach the baseline's final held-out accuracy (the paper's
    headline metric), as a share of the baseline's budget; and the held-out accuracy minus the baseline's at the
    snapshot nearest a quarter of the run (`early_step`: before the first epoch ends, in the default setting), which
    shows whether a selector helps in a run shorter than one epoch.
    """
    runs = results["runs"]
    out = {}
    for method, seeds in runs.items():
        shared = [seed for seed in seeds if seed in runs.get(baseline, {})]
        if not shared:
            continue
        differences, shares, early = [], [], []
        for seed in shared:
            mine, theirs = seeds[seed], runs[baseline][seed]
            target = theirs["heldout_accuracy"][-1]
            differences.append(mine["heldout_accuracy"][-1] - target)
            snapshot = int(np.argmin(np.abs(np.asarray(mine["steps"]) - mine["steps"][-1] / 4)))
            early.append(mine["heldout_accuracy"][snapshot] - theirs["heldout_accuracy"][snapshot])
            shares.append(
                rollouts_to_reach(mine["rollouts"], mine["heldout_accuracy"], target) / theirs["rollouts"][-1]
            )
        out[method] = dict(
            seeds=shared,
            difference=differences,
            rollouts_to_baseline_final=shares,
            early_step=seeds[shared[0]]["steps"][snapshot],
            early_difference=early,
        )
    return out


def _summarize(runs: dict) -> dict:
    summary = {}
    for method, seeds in runs.items():
        summary[method] = {}
        for key in next(iter(seeds.values()))["summary"]:
            values = [s["summary"][key] for s in seeds.values() if s["summary"][key] is not None]
            if values:
                summary[method][key] = {"mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values)}
    return summary


def _write(results: dict, trajectories: list[dict] | None, out: str) -> None:
    """real_cpu.json and the report; with `trajectories` (not `--summary_only`), the parquet file and the plots."""
    with open(os.path.join(out, "real_cpu.json"), "w") as f:
        json.dump(results, f, indent=1)
    if trajectories is not None:
        import pandas as pd

        frame = pd.DataFrame(trajectories).astype({"true_success": "float32", "predicted_success": "float32"})
        frame.to_parquet(os.path.join(out, "real_cpu_trajectories.parquet"), index=False)
    _report(results, out, plots=trajectories is not None)


def _report(results: dict, out: str, plots: bool = True) -> None:
    table = _markdown(results)
    with open(os.path.join(out, "real_cpu.md"), "w") as f:
        f.write(table)
    print(table)
    if plots:
        _plot(results, out)


def _spread(values: list[float], digits: int, percent: bool = False) -> str:
    values = np.asarray(values, float)
    scale, unit = (100, " %") if percent else (1, "")
    reached = np.isfinite(values)
    if not reached.any():
        return f"never (0/{values.size} seeds)"
    if not reached.all():
        values = values[reached]
        return (
            f"{scale * values.mean():.{digits}f} ± {scale * values.std():.{digits}f}{unit} on {values.size}/"
            f"{reached.size} seeds; never on the others"
        )
    return f"{scale * values.mean():.{digits}f} ± {scale * values.std():.{digits}f}{unit}"


COLUMNS = (
    ("heldout_gain", "held-out gain", 3),
    ("final_heldout_accuracy", "held-out accuracy", 3),
    ("unanimous_share", "unanimous groups after warmup", 2),
    ("rollouts", "rollouts", 0),
    ("distinct_prompts", "prompts trained after warmup", 0),
    ("batch_mae", "MAE vs s/k, selected batch", 3),
    ("mae_vs_true", "MAE vs true success, all prompts", 3),
    ("wall_s", "train s", 0),
)


def _markdown(results: dict) -> str:
    config = results["config"]
    seeds = config["seeds"]
    start = next(iter(next(iter(results["runs"].values())).values()))
    wall = results.get("wall_s")
    lines = [
        f"{config['steps']} GRPO steps of {config['prompts_per_step']} prompts x {config['num_generations']} "
        f"completions, {config['num_prompts']} training prompts, {config['num_eval_prompts']} held-out prompts, seeds "
        f"{seeds} (mean ± std over seeds). Held-out accuracy before RL: {start['heldout_accuracy'][0]:.3f}."
        + (f" Whole sweep: {wall / 60:.1f} min." if wall else ""),
        "",
        "| method | held-out gain | minus uniform's, same seed | rollouts to reach uniform's final accuracy | "
        f"minus uniform's at step {_early_step(results)} | " + " | ".join(label for _, label, _ in COLUMNS[1:]) + " |",
        "|---" * (len(COLUMNS) + 4) + "|",
    ]
    pairs = results["paired"]
    for method, summary in results["summary"].items():
        cells = [
            f"{summary[key]['mean']:.{digits}f} ± {summary[key]['std']:.{digits}f}" if key in summary else "–"
            for key, _, digits in COLUMNS
        ]
        difference = "—" if method == BASELINE or method not in pairs else _spread(pairs[method]["difference"], 3)
        share = "–" if method not in pairs else _spread(pairs[method]["rollouts_to_baseline_final"], 0, percent=True)
        early = "—" if method == BASELINE or method not in pairs else _spread(pairs[method]["early_difference"], 3)
        lines.append(f"| {method} | {cells[0]} | {difference} | {share} | {early} | " + " | ".join(cells[1:]) + " |")
    lines += ["", "Per seed, final held-out accuracy minus uniform's (same seed):", ""]
    for method, pair in pairs.items():
        if method != BASELINE:
            per_seed = ", ".join(f"{d:+.3f}" for d in pair["difference"])
            lines.append(f"- {method}: {per_seed}")
    return "\n".join(lines) + "\n"


def _early_step(results: dict) -> str:
    steps = {pair.get("early_step") for pair in results["paired"].values()}
    return "/".join(str(step) for step in sorted(steps - {None})) or "–"


def _plot(results: dict, out: str) -> None:
    plt = pyplot()
    if plt is None:
        return
    panels = {
        "real_cpu_accuracy_vs_rollouts.png": (("rollouts", "heldout_accuracy"), ("rollouts", "held-out accuracy")),
        "real_cpu_batch_mae.png": (("steps", "batch_mae"), ("step", "MAE, predicted vs s/k (selected batch)")),
        "real_cpu_mae_vs_true.png": (("steps", "mae_vs_true"), ("step", "MAE, predicted vs true success")),
    }
    for filename, ((x_key, y_key), (x_label, y_label)) in panels.items():
        fig, ax = plt.subplots(figsize=(6.5, 4.0))
        for method, seeds in results["runs"].items():
            curves = list(seeds.values())
            x = np.mean([c[x_key] for c in curves], axis=0)
            y = np.array([[np.nan if v is None else v for v in c[y_key]] for c in curves], dtype=float)
            if np.all(np.isnan(y)):
                continue
            mean, std = np.nanmean(y, axis=0), np.nanstd(y, axis=0)
            ax.plot(x, mean, label=method)
            ax.fill_between(x, mean - std, mean + std, alpha=0.15)
        if y_key == "heldout_accuracy" and BASELINE in results["runs"]:
            final = np.mean([c[y_key][-1] for c in results["runs"][BASELINE].values()])
            ax.axhline(final, color="gray", linestyle=":", linewidth=1, label=f"{BASELINE}'s final")
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.set_title(f"{y_label}: mean and ± 1 std over seeds", fontsize=9)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1000:g}k" if v >= 1000 else f"{v:g}"))
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
        fig.tight_layout()
        fig.savefig(os.path.join(out, filename), dpi=80)
        plt.close(fig)


if __name__ == "__main__":
    main()
