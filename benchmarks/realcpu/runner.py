"""
One run of the testbed — a regime, a method, a seed — with the real `GRPOTrainer` from the committed warm start, and a
sweep of runs over worker processes. Every `snapshot_every` steps a run records every training prompt's true success,
the held-out accuracy and the selector's predicted success.
"""

import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import numpy as np
from transformers import TrainerCallback

from benchmarks.realcpu import calibration, methods
from benchmarks.realcpu import setting as settings


class Snapshots(TrainerCallback):
    """
    Every `every` steps (and before the first): the truth, the held-out accuracy, the selector's prediction and its
    belief's intervals (`calibration.belief_intervals`), and how many times each prompt was chosen so far.
    """

    def __init__(self, setting, kgps, every: int, extra_rollouts=lambda: 0):
        self.setting, self.kgps, self.every, self.extra_rollouts = setting, kgps, every, extra_rollouts
        self.records = []

    def take(self, model, step: int) -> None:
        # Before a warmup epoch ends a selector has no prediction of its own.
        predicting = not self.kgps.in_warmup
        intervals = calibration.belief_intervals(self.kgps.selector) if predicting else None
        self.records.append(
            dict(
                step=step,
                rollouts=self.kgps.rollouts + self.extra_rollouts(),
                true=self.setting.true_success(model, self.setting.train),
                heldout=float(self.setting.true_success(model, self.setting.test).mean()),
                predicted=by_row(self.kgps, self.kgps.selector.predicted_success()) if predicting else None,
                # {level: (lower, upper)} logits by row; None where the selector holds no posterior
                intervals=None
                if intervals is None
                else {level: tuple(by_row(self.kgps, end) for end in ends) for level, ends in intervals.items()},
                selected=None if self.kgps.ledger is None else selected_by_row(self.kgps),
            )
        )

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.take(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0:
            self.take(model, state.global_step)


def by_row(kgps, values: np.ndarray) -> np.ndarray:
    """A selector's `(P,)` values for its distinct prompts as the `(N,)` values of the train dataset's rows: each row
    gets its prompt's (rows and prompts are one where no row repeats another's prompt)."""
    return np.asarray(values, float)[kgps.adapter.copies.prompt_of_row]


def selected_by_row(kgps) -> np.ndarray:
    """How many batches each prompt was chosen for so far, on its first row (0 on the rows repeating it), `(N,)`."""
    copies = kgps.adapter.copies
    return np.bincount(copies.first_row, kgps.ledger.times_selected, minlength=copies.prompt_of_row.size).astype(int)


def run(setting, method: str, seed: int, observers=()) -> dict:
    """
    Trains a copy of the warm start with `method` for the regime's steps; the snapshots and the logged metrics.
    `observers`: callables `(setting, kgps_callback) -> TrainerCallback` for callbacks of one's own (a trace).
    """
    import copy

    from trl import GRPOConfig, GRPOTrainer

    from trl_kgps import KGPSCallback

    regime = setting.regime
    model = copy.deepcopy(setting.model)
    profiling = methods.profiling_rollouts(method, setting)  # on the whole pool, before a filter drops rows of it
    if methods.base_method(method) in methods.FILTERED:  # the rows the filter keeps: truth and levels follow them
        setting = methods.filtered(setting, model, seed)
    selector, config = methods.build(method, setting, model, seed)
    train = methods.dataset_for(method, setting.train)
    if methods.base_method(method) == "one_line_profiled":  # the warm start's profiled pass rates, as a user's column
        train = train.add_column("pass_rate", methods.profiled_pass_rates(setting, model, seed).tolist())
    if getattr(config, "feature_columns", None) == ["embedding"]:  # the warm start's own prompt embeddings
        embeddings = methods.policy_embeddings(model, setting.tokenizer, train["prompt"])
        train = train.add_column("embedding", embeddings.tolist())
    kgps = KGPSCallback(config, selector=selector)
    trainer_class, extra = GRPOTrainer, {}
    if method in methods.DYNAMIC_SAMPLING:
        from benchmarks.realcpu.dynamic_sampling import DynamicSamplingTrainer

        trainer_class, extra = DynamicSamplingTrainer, dict(kgps=kgps, rounds_of=methods.ROUNDS_OF.get(method, 1))
    if method.partition("@")[0] == "oracle_sizes":
        from benchmarks.realcpu.allocation import AllocationTrainer

        trainer_class = AllocationTrainer
    steps = methods.steps(method, setting)
    trainer = None  # the snapshots read the rollouts it generated once it is built
    snapshots = Snapshots(
        setting,
        kgps,
        regime.snapshot_every,
        lambda: _extra_rollouts(method, kgps, trainer) + profiling,
    )
    args = GRPOConfig(
        output_dir=os.path.join(tempfile.gettempdir(), "trl-kgps-real-cpu", f"{regime.name}-{method}-{seed}"),
        report_to="none",
        per_device_train_batch_size=regime.rollouts_per_step,
        num_generations=methods.num_generations(method, regime),
        max_steps=steps,
        logging_steps=1,
        save_strategy="no",  # nothing is saved
        seed=seed,
        disable_tqdm=True,
        log_level="error",
        **setting.grpo,
    )
    trainer = trainer_class(
        model=model,
        reward_funcs=setting.reward,
        args=args,
        train_dataset=train,
        processing_class=setting.tokenizer,
        callbacks=[kgps, snapshots, *(observer(setting, kgps) for observer in observers)],
        **extra,
    )
    _quiet(trainer)
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    last = trainer.state.global_step
    if snapshots.records[-1]["step"] != last:
        snapshots.take(trainer.model, last)
    logged = [r for r in trainer.state.log_history if r.get("step", 0) > kgps.ledger.warmup_batches]
    return dict(
        records=snapshots.records,
        wall_s=wall,
        # the share of groups that were mixed, as the trainer counts its groups (`oracle_sizes`: each prompt's rows)
        informative=_mean(logged, getattr(trainer, "informative_metric", "kgps/informative")),
        batch_mae=[(r["step"], r["kgps/mae"]) for r in logged if "kgps/mae" in r],
        # Every prompt is chosen once by each warmup epoch: more than that, and a selector chose it afterwards.
        distinct_prompts=int(np.count_nonzero(kgps.ledger.times_selected > kgps.config.warmup_epochs)),
        times_selected=selected_by_row(kgps).tolist(),
        group_size=regime.num_generations,
        levels=setting.true_levels.tolist(),
        dropped_share=_dropped_share(trainer),
        capped_steps=getattr(trainer, "capped_steps", None),
    )


def _quiet(trainer) -> None:
    """No per-step metric dicts on stdout: the benchmark prints one line per run."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)


def _dropped_share(trainer) -> float | None:
    """Dynamic sampling's share of the groups generated that it dropped; `None` for another trainer."""
    if not hasattr(trainer, "groups_dropped"):
        return None
    return trainer.groups_dropped / trainer.groups_generated


def _extra_rollouts(method: str, kgps, trainer) -> int:
    """
    Rollouts beyond the batches the callback's sampler drew: dynamic sampling's further batches, or `ds`'s candidates
    screened, minus those kept and trained on (counted once).
    """
    if method in methods.DYNAMIC_SAMPLING:
        return 0 if trainer is None else trainer.rollouts_beyond
    if method != "ds":
        return 0
    sampler = kgps.sampler
    trained_by_selector = max(0, sampler.ledger.batches_chosen - sampler.ledger.warmup_batches) * sampler.batch_size
    return (kgps.selector.screened - trained_by_selector) * sampler.mini_repeat_count


def _mean(records: list[dict], key: str) -> float:
    values = [r[key] for r in records if key in r]
    return float(np.mean(values)) if values else float("nan")


# --- a sweep over worker processes ---------------------------------------------------------------------------------

_SETTINGS: dict = {}  # a worker's settings, built once per regime


def _init_worker(threads: int) -> None:
    import warnings

    import torch

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # TRL 1.16 reads transformers 5's renamed gradient-checkpointing attributes, which warns on every access
    warnings.filterwarnings("ignore", ".*is deprecated and will be removed in v6", FutureWarning)
    torch.set_num_threads(threads)


def run_task(task: tuple) -> tuple:
    """
    One `(regime, method, seed)` in a worker, the regime named or a `Regime` (a named one trained otherwise, as the
    learning-rate sweep does): `(task, curves)` (see `report.curves`).
    """
    from benchmarks.realcpu.report import curves

    regime, method, seed = task
    name = regime if isinstance(regime, str) else regime.name
    if name not in _SETTINGS:
        _SETTINGS[name] = settings.build(settings.ALL_REGIMES[name])
    setting = _SETTINGS[name] if isinstance(regime, str) else settings.with_regime(_SETTINGS[name], regime)
    return task, curves(run(setting, method, seed))


def sweep(tasks: list[tuple], jobs: int, threads: int):
    """Yields `(task, curves)` as runs finish: in this process when `jobs == 1`, else over `jobs` worker processes."""
    if jobs == 1:
        _init_worker(threads)
        for task in tasks:
            yield run_task(task)
        return
    with ProcessPoolExecutor(
        jobs, mp_context=get_context("spawn"), initializer=_init_worker, initargs=(threads,)
    ) as pool:
        yield from pool.map(run_task, tasks)
