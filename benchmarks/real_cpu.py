"""
A real learning benchmark on CPU: does KGPS make a real policy learn faster per rollout?

A small Qwen2 (built from a config, character tokenizer) is warmed up once on arithmetic so its success rates
spread between 0 and 1, then trained with the real `GRPOTrainer` from that same start by each selector — uniform,
KGPS, MoPPS, GRESO — at the same rollout budget, for several seeds, and by DAPO-style dynamic sampling (DS), which
spends extra rollouts. Every `--snapshot_every` steps the run pauses to measure every training prompt's TRUE
success rate under the current policy (`--true_samples` completions each), the held-out accuracy, and every
selector's predicted success: the trajectories score each predictor against the truth, whatever it selected.

```bash
python benchmarks/real_cpu.py                    # the committed results: 5 methods x 3 seeds, 10–14 min on 2 cores
python benchmarks/real_cpu.py --methods kgps,uniform --seeds 1 --steps 40 --out /tmp/quick   # a few minutes
python benchmarks/real_cpu.py --paper --out results_math   # the paper's Qwen3-0.6B / MATH setting, on a GPU
```

Writes into `--out`: `real_cpu.json` (per method and seed: rollouts, held-out accuracy, MAE vs true success,
informative share), `real_cpu.md`, `real_cpu_accuracy_vs_rollouts.png` (the paper's Fig. 1a),
`real_cpu_batch_mae.png` (Fig. 1b: predicted against empirical `s/k` of each selected batch),
`real_cpu_mae_vs_true.png` (predicted against true success, every prompt) and
`real_cpu_trajectories.parquet` (method, seed, step, rollouts, prompt, level, true and predicted success).

DS is emulated outside the trainer: before each batch, candidates from a uniform stream are rolled out by the
current policy (`num_generations` completions each) and kept when their group is mixed (`0 < s < k`); the kept
prompts then train. Every candidate's rollouts count towards DS's budget (real DS trains on the kept ones, so the
trainer's own rollouts of them are not counted twice).
"""

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import torch
from transformers import TrainerCallback


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from trl_kgps import KGPSCallback, KGPSConfig  # noqa: E402
from trl_kgps._plots import pyplot  # noqa: E402
from trl_kgps.tasks import arithmetic, tiny  # noqa: E402
from trl_kgps.tasks.evaluation import success_rates  # noqa: E402


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
METHODS = ("uniform", "kgps", "mopps", "greso", "ds")


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


def cpu_setting(args) -> Setting:
    tokenizer = tiny.build_tokenizer()
    model = tiny.build_model(tokenizer, seed=0)
    warm = arithmetic.make_problems(8000, seed=100)
    tiny.warm_start(model, tokenizer, warm["prompt"], warm["answer"], args.warm_start_steps)
    problems = arithmetic.make_dataset(args.num_prompts + args.num_eval_prompts, seed=1)
    split = problems.train_test_split(test_size=args.num_eval_prompts, shuffle=False)
    grpo = dict(
        use_cpu=True,
        bf16=False,
        max_completion_length=4,
        learning_rate=args.learning_rate or 3e-4,
        warmup_steps=args.lr_warmup_steps,
    )
    return Setting(model, tokenizer, split["train"], split["test"], arithmetic.arithmetic_reward, ("answer",), grpo, 4)


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
    return Setting(model, tokenizer, train, test, accuracy_reward, ("solution",), grpo, 4096)


def _success(setting: Setting, model, dataset, samples: int, seed: int) -> np.ndarray:
    """The success rate of each of `dataset`'s prompts under `model`, from `samples` completions each."""
    columns = {name: dataset[name] for name in setting.columns}
    return success_rates(
        model, setting.tokenizer, dataset["prompt"], setting.reward, columns, samples=samples,
        max_new_tokens=setting.max_new_tokens, seed=seed,
    )  # fmt: skip


class DynamicSampling:
    """
    DAPO's dynamic sampling as a prompt selector: candidates from a seeded uniform stream are rolled out by the
    current policy (`screen(indices)` returns their success rates) and kept when their group is mixed, until
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

    def initialize(self, indices, successes, trials) -> None:
        self.update(indices, successes, trials)

    def update(self, indices, successes, trials) -> None:
        trials = np.asarray(trials)
        seen = trials > 0
        self.last[np.asarray(indices)[seen]] = np.asarray(successes)[seen] / trials[seen]

    def predict(self, delta_norm) -> None:
        pass

    def predicted_success(self, indices=None) -> np.ndarray:
        return self.last.copy() if indices is None else self.last[np.asarray(indices)]

    def state_dict(self) -> dict:
        raise NotImplementedError("the benchmark's DS selector is not checkpointed")

    def load_state_dict(self, state) -> None:
        raise NotImplementedError("the benchmark's DS selector is not checkpointed")


class Snapshots(TrainerCallback):
    """Every `every` steps (and before the first): true success of every training prompt, held-out accuracy, and
    the selector's predicted success."""

    def __init__(self, setting: Setting, kgps: KGPSCallback, args, extra_rollouts=lambda: 0):
        self.setting, self.kgps, self.args, self.extra_rollouts = setting, kgps, args, extra_rollouts
        self.records = []

    def take(self, model, step: int) -> None:
        setting, args = self.setting, self.args
        self.records.append(
            dict(
                step=step,
                rollouts=self.kgps.rollouts + self.extra_rollouts(),
                true=_success(setting, model, setting.train, args.true_samples, seed=10_000 + step),
                heldout=float(_success(setting, model, setting.test, args.eval_samples, seed=20_000 + step).mean()),
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
    selector = method
    if method == "ds":

        def screen(indices):
            return _success(setting, model, setting.train.select(indices), G, seed=int(selector.rng.integers(2**31)))

        selector = DynamicSampling(len(setting.train), screen, seed)
    kgps = KGPSCallback(KGPSConfig(), selector=selector)

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
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    if args.steps % args.snapshot_every:
        snapshots.take(trainer.model, args.steps)
    logged = trainer.state.log_history
    warmup_steps = kgps.sampler.warmup_batches
    after_warmup = [r for r in logged if r.get("step", 0) > warmup_steps]
    # Every prompt is chosen once by the warmup epoch: more than that, and a selector chose it afterwards.
    distinct = int(np.count_nonzero(kgps.sampler.times_selected > kgps.config.warmup_epochs))
    return dict(
        records=snapshots.records,
        wall_s=wall,
        informative_share=_mean(after_warmup, "kgps/informative"),
        spearman=_mean(after_warmup, "kgps/spearman"),
        batch_mae=[(r["step"], r["kgps/mae"]) for r in after_warmup if "kgps/mae" in r],
        distinct_prompts=distinct,
    )


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
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--snapshot_every", type=int, default=25)
    parser.add_argument("--num_prompts", type=int, default=256)
    parser.add_argument("--num_eval_prompts", type=int, default=256)
    parser.add_argument("--prompts_per_step", type=int, default=8)
    parser.add_argument("--num_generations", type=int, default=8)
    parser.add_argument("--true_samples", type=int, default=16)
    parser.add_argument("--eval_samples", type=int, default=8)
    parser.add_argument("--warm_start_steps", type=int, default=600)
    parser.add_argument("--learning_rate", type=float, default=None)
    parser.add_argument("--lr_warmup_steps", type=int, default=20)
    parser.add_argument("--paper", action="store_true", help="Qwen3-0.6B on MATH (GPU)")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--report_only", action="store_true", help="rewrite the table and plots from real_cpu.json")
    args = parser.parse_args(argv)
    if args.report_only:
        with open(os.path.join(args.out, "real_cpu.json")) as f:
            results = json.load(f)
        _report(results, args.out)
        return
    methods = args.methods.split(",")
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"--methods: unknown {unknown}; choose among {list(METHODS)}.")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    os.makedirs(args.out, exist_ok=True)

    start = time.perf_counter()
    setting = paper_setting(args) if args.paper else cpu_setting(args)
    results = {"config": vars(args), "runs": {}}
    trajectories = []
    for method in methods:
        results["runs"][method] = {}
        for seed in range(args.seeds):
            outcome = run(setting, method, seed, args)
            results["runs"][method][str(seed)] = _curves(outcome)
            trajectories += _rows(outcome, method, seed, setting.train)
            print(f"{method} seed {seed}: {results['runs'][method][str(seed)]['summary']}", flush=True)
    results["summary"] = _summarize(results["runs"])
    results["wall_s"] = time.perf_counter() - start
    _write(results, trajectories, args.out)


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
        final_train_success=curves["train_true_success"][-1],
        rollouts=curves["rollouts"][-1],
        informative_share=outcome["informative_share"],
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


def _summarize(runs: dict) -> dict:
    summary = {}
    for method, seeds in runs.items():
        summary[method] = {}
        for key in seeds["0"]["summary"]:
            values = [s["summary"][key] for s in seeds.values() if s["summary"][key] is not None]
            if values:
                summary[method][key] = {"mean": float(np.mean(values)), "std": float(np.std(values)), "n": len(values)}
    return summary


def _write(results: dict, trajectories: list[dict], out: str) -> None:
    from datasets import Dataset

    with open(os.path.join(out, "real_cpu.json"), "w") as f:
        json.dump(results, f, indent=1)
    Dataset.from_list(trajectories).to_parquet(os.path.join(out, "real_cpu_trajectories.parquet"))
    _report(results, out)


def _report(results: dict, out: str) -> None:
    table = _markdown(results) + _paired(results)
    with open(os.path.join(out, "real_cpu.md"), "w") as f:
        f.write(table)
    print(table)
    _plot(results, out)


def _paired(results: dict, baseline: str = "uniform") -> str:
    """Each method's final held-out accuracy minus the baseline's in the run with the same seed."""
    runs = results["runs"]
    if baseline not in runs:
        return ""
    lines = ["", f"Final held-out accuracy minus {baseline}'s, same seed (paired):", ""]
    for method, seeds in runs.items():
        if method == baseline:
            continue
        differences = [
            seeds[seed]["heldout_accuracy"][-1] - runs[baseline][seed]["heldout_accuracy"][-1]
            for seed in seeds
            if seed in runs[baseline]
        ]
        per_seed = ", ".join(f"{d:+.3f}" for d in differences)
        lines.append(f"- {method}: {np.mean(differences):+.3f} ± {np.std(differences):.3f} (seeds: {per_seed})")
    return "\n".join(lines) + "\n"


COLUMNS = (
    ("final_heldout_accuracy", "held-out accuracy", 3),
    ("final_train_success", "train-pool success", 3),
    ("rollouts", "rollouts", 0),
    ("informative_share", "informative share", 3),
    ("batch_mae", "MAE vs s/k, selected batch", 3),
    ("spearman", "Spearman vs s/k", 3),
    ("mae_vs_true", "MAE vs true success, all prompts", 3),
    ("distinct_prompts", "prompts trained after warmup", 0),
    ("wall_s", "train s", 0),
)


def _markdown(results: dict) -> str:
    config = results["config"]
    start = next(iter(results["runs"].values()))["0"]
    lines = [
        f"{config['steps']} GRPO steps of {config['prompts_per_step']} prompts x {config['num_generations']} "
        f"completions, {config['num_prompts']} training prompts, {config['seeds']} seeds (mean ± std). Held-out "
        f"accuracy before training: {start['heldout_accuracy'][0]:.3f}; train-pool success "
        f"{start['train_true_success'][0]:.3f}.",
        "",
        "| method | " + " | ".join(label for _, label, _ in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for method, summary in results["summary"].items():
        cells = [
            f"{summary[key]['mean']:.{digits}f} ± {summary[key]['std']:.{digits}f}" if key in summary else "–"
            for key, _, digits in COLUMNS
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for method, seeds in results["runs"].items():
            curves = list(seeds.values())
            x = np.mean([c[x_key] for c in curves], axis=0)
            y = np.array([[np.nan if v is None else v for v in c[y_key]] for c in curves], dtype=float)
            if np.all(np.isnan(y)):
                continue
            mean, std = np.nanmean(y, axis=0), np.nanstd(y, axis=0)
            ax.plot(x, mean, label=method)
            ax.fill_between(x, mean - std, mean + std, alpha=0.15)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, filename), dpi=80)
        plt.close(fig)


if __name__ == "__main__":
    main()
