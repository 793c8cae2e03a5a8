"""
Every method the testbed compares, by name: the library's selectors (`uniform`, `kgps` the default reading the
dataset's `level` column as `trl-kgps train` does, `kgps_global` the default with no column, `kgps_per_prompt` the
per-prompt default of trl-kgps 0.2, `kgps_paper`, `mopps`, `greso`, `dps`, `arcus`, and every configuration in
`trl_kgps.demo.variants.VARIANTS`, alone or with `:level` or `:embedding` as its feature), and benchmark-only ones that
know what no real selector can:

- `oracle`: every training prompt's current true success `p`, re-measured before every batch;
- `oracle@25`, `oracle@100`: the same truth, re-measured only every 25 or 100 batches (what staleness costs; any
  oracle takes `@<batches>`);
- `oracle_level`: each difficulty level's current mean chance of a mixed group, nothing per prompt (what shared
  structure alone is worth);
- `oracle_greedy`: the per-prompt truth, ranked instead of drawn; `oracle_dealt` the same weights dealt as a stride
  scheduler deals them (`trl_kgps.selectors.experimental.deal`: each prompt accrues its share every batch and is
  chosen when that credit comes due), so that a prompt comes back at regular intervals, as in an epoch walk;
  `oracle_cooldown` draws as `oracle` does but keeps each prompt out of the draw for a quarter of an epoch (`N / 4B`
  batches) after it is drawn (`trl_kgps.selectors.experimental.Cooldown`), an epoch walk's spacing without its order;
- `oracle_sizes`, `oracle_wide`: the per-prompt truth deciding how many rollouts each prompt gets, with the step's
  rollouts unchanged: `oracle_sizes` chooses `oracle`'s prompts and gives each a group of 0, 2, 4, 8 or 16, chosen
  greedily by what the rollouts add to its chance of a mixed group, one baseline over the group
  (`realcpu.allocation`); `oracle_wide`
  trains half as many prompts with groups twice as large (`B/2 x 2G`, drawn as `oracle` draws for groups of `2G`);
- `one_line`, `one_line_no_metadata`: `KGPSCallback()` with no arguments, on the dataset as a user holds it
  (`ONE_LINE`: `prompt`, `answer` and the regime's `level`; or `prompt` and `answer` alone); `one_line_by_row` the
  one line keeping one belief per row, copies of a prompt apart (`KGPSConfig(prompt_key=None)`), and
  `one_line_no_metadata_by_row` the same without the `level` column; `one_line_prior` the one line starting from
  a regime's `solve_rate` column (`KGPSConfig(prior_column="solve_rate")`), and `one_line_profiled` starting from
  the warm start's profiled pass rates as `offline_filter` measures them (a `pass_rate` column,
  `KGPSConfig(prior_column="pass_rate")`; its profiling counted as `offline_filter`'s is), and `one_line_filtered` the
  one line on the rows `offline_filter` keeps from the same profile (`filtered`): a user who filtered the dataset once,
  then added `KGPSCallback()`, its profiling counted too;
- `uniform_ds`, `one_line_ds`: DAPO's dynamic sampling in the trainer (`realcpu.dynamic_sampling`): groups of equal
  rewards are dropped and generation goes on, `B` prompts a round, until the step holds `B` mixed groups, on
  uniformly drawn prompts or on those `KGPSCallback()` chooses (every completion generated is a rollout);
  `uniform_ds3`, `one_line_ds3` the same with rounds of `3B` prompts, as DAPO's recipe generates;
  `uniform_ds_half` is `uniform_ds` trained half the regime's steps, a run of its own length (`RUN_LENGTH`);
- `one_line_x2`, `one_line_long`: `KGPSCallback()` trained 2 or 3 times the regime's steps (`RUN_LENGTH`), each a run
  of its own length (warmup steps as the regime's, then its schedule over all of its steps): what the one line reaches
  with the rollouts dynamic sampling spends, read at each run's end; `uniform_long`: uniform trained 3 times the
  steps the same way, beside `one_line_long`; `one_line_filter_budget` the one line trained the rollouts
  `offline_filter` spends, its profiling included (`AT_FILTER_BUDGET`), a run of its own length too;
- `ds`: dynamic sampling emulated outside the trainer (it screens candidates, then trains on a fresh group of each);
- `dps_countdown`, `dps_whole_pool`: DPS with the authors' other settings (`DPS_RECIPES`);
- `kgps_ahead4`, `kgps_ahead8`: the default with every batch chosen 4 or 8 batches before it is generated instead of
  one (`ChosenAhead`), as TRL's asynchronous trainer chooses prompts several versions ahead of the policy that
  trains on them (what choosing from stale beliefs costs); `kgps_ahead1` is the default itself, bit for bit.

What practitioners pick (`trl_kgps.selectors.practice`; `PRACTICE`): `gaussian` (FG-ExPO's Gaussian curriculum),
`insight` (InSight's weighted mutual information), and `offline_filter`, which profiles the warm start before training
(each distinct training prompt's successes in `PROFILE_SAMPLES` = 8 samples, drawn as Binomial(8, p) from its exact
true success `p`, seeded by the run's seed: what 8 real rollouts give, in distribution), drops the prompts at 0/8 and
8/8 and trains on the rest in TRL's order. Its profiling rollouts, 8 per distinct prompt, count in every per-rollout
figure (`profiling_rollouts`, added to a run's rollouts from its first snapshot). `offline_filter_redrawn` keeps the
same prompts but draws `B` of them afresh every batch instead of walking them in epochs (`Redrawn`).

The oracles draw the `B` prompts of a batch without replacement in proportion to the chance of a mixed group of `G`,
`u = 1 - p^G - (1 - p)^G` (`trl_kgps.demo.simulator.oracle_batch`); none needs a warmup, and their truth costs no rollouts.
"""

import dataclasses
from collections import deque
from collections.abc import Callable

import numpy as np

from benchmarks.realcpu import allocation
from trl_kgps import KGPSConfig
from trl_kgps.adapters.dataset_columns import selector_for
from trl_kgps.demo.simulator import oracle_batch
from trl_kgps.demo.variants import VARIANTS, variant_config
from trl_kgps.selectors import DPSSelector, OfflineFilterSelector
from trl_kgps.selectors.experimental import Cooldown, ExperimentalConfig, deal


# DPS with the authors' other settings (`dps` is their MATH recipe: decay 0.7, 32 candidates per selected prompt):
# their Countdown and Geometry3K recipe, and every prompt a candidate at every step (their MATH runs, where 32 x 256
# candidates exceed the 7,500 problems of MATH's training set).
DPS_RECIPES = {
    "dps_countdown": dict(decay=0.5, candidate_ratio=8.0),
    "dps_whole_pool": dict(decay=0.7, candidate_ratio=float("inf")),
}

# The suite's methods: the baseline, the one line as users write it, the library's other selectors a user can pick,
# and the information ceiling.
SUITE = (
    "uniform", "one_line", "one_line_no_metadata", "kgps_per_prompt", "mopps", "greso", "dps", "oracle",
)  # fmt: skip
# `KGPSCallback()` as users write it, on the columns a user's dataset holds: the regime's `level` (true or corrupted,
# never `true_level`), or none.
ONE_LINE = {
    "one_line": ("prompt", "answer", "level", "solve_rate"),
    "one_line_no_metadata": ("prompt", "answer"),
    "one_line_by_row": ("prompt", "answer", "level"),
    "one_line_no_metadata_by_row": ("prompt", "answer"),
    "one_line_prior": ("prompt", "answer", "level", "solve_rate"),
    "one_line_profiled": ("prompt", "answer", "level"),
    "one_line_filtered": ("prompt", "answer", "level"),
    "one_line_adaptive_q": ("prompt", "answer", "level"),
    "one_line_gamma_1": ("prompt", "answer", "level"),
    "one_line_fixed_gamma": ("prompt", "answer", "level"),
}
# The one line with a field set: one belief per row, copies of a prompt apart, starting from `solve_rate`, or its
# drift larger (gamma), learnt from the surprise (the default since these runs: `one_line_adaptive_q` runs as
# `one_line` does now) or fixed (`one_line_fixed_gamma`: the default before, which `one_line` in `drift_0_4/` and
# `calibration_5_9/` ran).
ONE_LINE_CONFIGS = {
    "one_line_by_row": KGPSConfig(prompt_key=None),
    "one_line_no_metadata_by_row": KGPSConfig(prompt_key=None),
    "one_line_prior": KGPSConfig(prior_column="solve_rate"),
    "one_line_profiled": KGPSConfig(prior_column="pass_rate"),
    "one_line_adaptive_q": ExperimentalConfig(process_noise_adaptation=0.05),
    "one_line_gamma_1": KGPSConfig(gamma=1.0, process_noise_adaptation=0.0),
    "one_line_fixed_gamma": KGPSConfig(process_noise_adaptation=0.0),
}


# What practitioners pick: the library's `gaussian`, `insight` and `offline_filter` (profiled by the benchmark).
PRACTICE = ("gaussian", "insight", "offline_filter")
# The samples per prompt `offline_filter` profiles the warm start with, and its draws' stream (the run's seed first).
PROFILE_SAMPLES, PROFILE_STREAM = 8, 8
# The methods that profile the warm start so, before training: the filter, the one line starting from the profile,
# and the one line on the rows the filter keeps (`FILTERED`).
PROFILED = ("offline_filter", "one_line_profiled", "one_line_filtered", "offline_filter_redrawn")
FILTERED = ("one_line_filtered",)
# The filter's kept prompts drawn afresh every batch instead of walked (`Redrawn`): what its epochs are worth.
REDRAWN = ("offline_filter_redrawn",)


# Dynamic sampling (`realcpu.dynamic_sampling`) on the prompts of another method's selector.
DYNAMIC_SAMPLING = {
    "uniform_ds": "uniform", "one_line_ds": "one_line", "uniform_ds3": "uniform", "one_line_ds3": "one_line",
    "uniform_ds_half": "uniform",
}  # fmt: skip
# Its rounds' prompts, in batches of `B` (1 unless named here).
ROUNDS_OF = {"uniform_ds3": 3, "one_line_ds3": 3}
# A method trained a multiple of the regime's steps, each a run of its own length: its base method and the multiple.
RUN_LENGTH = {
    "one_line_x2": ("one_line", 2), "one_line_long": ("one_line", 3), "uniform_long": ("uniform", 3),
    "uniform_ds_half": ("uniform", 0.5),
}  # fmt: skip
# A method trained the rollouts `offline_filter` spends, its profiling included: the regime's steps plus the steps
# `PROFILE_SAMPLES` rollouts per distinct prompt buy (528 on a 512-prompt pool, 656 on 1,024), each a run of its own
# length: what the filter's rule is worth against the one line's at one budget.
AT_FILTER_BUDGET = {"one_line_filter_budget": "one_line"}


def base_method(method: str) -> str:
    """The method whose selector and dataset `method` uses: `one_line` for `one_line_ds` and `one_line_long`."""
    return DYNAMIC_SAMPLING.get(method) or RUN_LENGTH.get(method, (None,))[0] or AT_FILTER_BUDGET.get(method) or method


def steps(method: str, setting) -> int:
    """
    The optimizer steps `method` trains in `setting.regime`: the regime's, times `RUN_LENGTH`'s multiple; for
    `AT_FILTER_BUDGET`, plus the steps the filter's profiling rollouts on `setting.train` buy.
    """
    regime = setting.regime
    if method in AT_FILTER_BUDGET:
        return regime.steps + round(profiling_rollouts("offline_filter", setting) / regime.rollouts_per_step)
    return round(regime.steps * RUN_LENGTH.get(method, (None, 1))[1])


def dataset_for(method: str, train):
    """The train dataset as `method` sees it: for the one line, only the columns a user's dataset holds (`ONE_LINE`)."""
    method = base_method(method)
    if method not in ONE_LINE:
        return train
    return train.select_columns([name for name in ONE_LINE[method] if name in train.column_names])


# The default choosing `k` batches ahead (`ChosenAhead`); `kgps` itself chooses one ahead, as `kgps_ahead1` does.
AHEAD = {"kgps_ahead1": 1, "kgps_ahead4": 4, "kgps_ahead8": 8}
OTHERS = (
    "kgps", "kgps_global", "kgps:embedding", "kgps_paper", "arcus", "oracle@25", "oracle@100", "oracle_level", "oracle_greedy",
    "ds", *DYNAMIC_SAMPLING, *RUN_LENGTH, *AT_FILTER_BUDGET, *DPS_RECIPES, *AHEAD, *ONE_LINE_CONFIGS, *PRACTICE,
    *FILTERED, *REDRAWN,
)  # fmt: skip
# Each oracle takes a refresh period: `oracle@25`.
ORACLES = ("oracle", "oracle_level", "oracle_greedy", "oracle_dealt", "oracle_cooldown", "oracle_sizes", "oracle_wide")
# The share of an epoch `oracle_cooldown` keeps a prompt out of the draw after drawing it.
ORACLE_COOLDOWN = 0.25
# The oracle that trains half the prompts with groups twice as large (the step's rollouts stay the same).
WIDE = {"oracle_wide": 2}
BASELINE = "uniform"
# The columns a KGPS configuration can read as its feature, named `<variant>:<column>` (`variant_config`): the
# dataset's `level`, as `trl-kgps train` does (the suite's `kgps` is the default with it, `kgps_global` the default
# without any column), and `embedding`, the warm-start policy's own prompt embeddings (`policy_embeddings`), as a user
# without a feature column could compute them.
FEATURE_COLUMNS = ("level", "embedding")


def num_generations(method: str, regime) -> int:
    """
    `G`, the completions per group `method` trains with in `regime`: the regime's, scaled by `WIDE`; `oracle_sizes`
    trains groups of `allocation.UNIT`, several to a prompt.
    """
    name = method.partition("@")[0]
    return allocation.UNIT if name == "oracle_sizes" else regime.num_generations * WIDE.get(name, 1)


def known(method: str) -> bool:
    """
    A library selector, a variant (with `:level` it learns from the dataset's `level` column, with `:embedding` from
    the policy's prompt embeddings), `ds`, or an oracle with an optional refresh period (`oracle_level@10`).
    """
    _, _, column = method.partition(":")
    if column:
        return column in FEATURE_COLUMNS and variant_config(method) is not None
    name, at, refresh = method.partition("@")
    if name in ORACLES:
        return not at or (refresh.isdigit() and int(refresh) > 0)
    return method in SUITE or method in OTHERS or method in VARIANTS


class _BenchmarkSelector:
    """What the benchmark-only selectors share: no checkpoints, no use for the update norm."""

    def initialize(self, indices, successes, trials) -> None:
        self.update(indices, successes, trials)

    def predict(self, delta_norm) -> None:
        pass

    def update(self, indices, successes, trials) -> None:
        pass

    def state_dict(self) -> dict:
        raise NotImplementedError(f"the benchmark's {type(self).__name__} is not checkpointed")

    def load_state_dict(self, state) -> None:
        raise NotImplementedError(f"the benchmark's {type(self).__name__} is not checkpointed")


class Oracle(_BenchmarkSelector):
    r"""
    Knows the current success rate of each of the `num_prompts` training prompts, shape `(N,)`, from `truth()`
    (exact, re-measured every `refresh` batches, never counted as rollouts) and trains on the prompts likely to give a
    mixed group of `G`, \(u = 1 - p^G - (1 - p)^G\).

    `levels=None`: per prompt. With `levels` (shape `(N,)`, one label per prompt), it keeps only each level's mean
    `u` and gives it to every prompt of the level: what knowing the shared structure, and nothing per prompt, is
    worth. `rule="proportional"` draws `B` distinct prompts in proportion to `u` (the training distribution of DAPO's
    dynamic sampling without its screening rollouts); `rule="greedy"` takes the `B` largest, ties in random order;
    `rule="dealt"` deals them in proportion to `u` (`deal`, from starting credits uniform in `[0, 1)`);
    `rule="cooldown"` draws as `"proportional"` does, none drawn in the last `ORACLE_COOLDOWN * N / B` batches;
    `rule="sizes"` draws the `batch_size * UNIT / G` prompts the step's rollouts give (`batch_size` is counted in
    groups of `allocation.UNIT`) as `"proportional"` does, gives them group sizes (`allocation.group_sizes`) and
    returns each once per unit of its size.
    """

    def __init__(
        self,
        num_prompts: int,
        truth: Callable[[], np.ndarray],
        group_size: int,
        refresh: int,
        seed: int,
        rule: str = "proportional",
        levels=None,
    ):
        if refresh < 1 or rule not in ("proportional", "greedy", "dealt", "cooldown", "sizes"):
            raise ValueError(
                f"Oracle(refresh={refresh}, rule={rule!r}): refresh >= 1, rule proportional, greedy, dealt, cooldown "
                "or sizes."
            )
        self.num_prompts, self.truth, self.group_size, self.refresh, self.rule = (
            num_prompts, truth, group_size, refresh, rule
        )  # fmt: skip
        self.levels = None if levels is None else np.asarray(levels)
        if levels is not None:  # each prompt's level as an index into the sorted distinct levels
            _, self._level_of = np.unique(self.levels, return_inverse=True)
        self.rng = np.random.default_rng(seed)
        self.selections = 0
        self.p = self._known = None
        self.credit = self.rng.random(num_prompts) if rule == "dealt" else None  # the deal's starting credits
        self.cooldown = Cooldown(num_prompts, ORACLE_COOLDOWN) if rule == "cooldown" else None

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        if self.selections % self.refresh == 0:
            measured = np.asarray(self.truth(), float)
            if self.p is None or not np.array_equal(measured, self.p):
                self.p, self._known = measured, None
        self.selections += 1
        if self.rule == "sizes":
            rollouts = batch_size * allocation.UNIT
            p, G = self.known_success(), self.group_size
            chosen = oracle_batch(p, G, rollouts // G, self.rng, False, exclude)
            sizes = allocation.group_sizes(p[chosen], rollouts, self.rng)
            return allocation.unit_groups(chosen, sizes)
        if self.rule == "dealt":
            p, G = self.known_success(), self.group_size
            excluded = np.empty(0, dtype=np.int64) if exclude is None else np.asarray(exclude, dtype=np.int64)
            return deal(self.credit, 1 - p**G - (1 - p) ** G, batch_size, excluded)
        if self.cooldown is not None:  # the trainer's exclusions and the prompts still cooling down
            excluded = np.empty(0, dtype=np.int64) if exclude is None else np.unique(np.asarray(exclude, np.int64))
            exclude = self.cooldown.excluded(batch_size, excluded)
        chosen = oracle_batch(
            self.known_success(), self.group_size, batch_size, self.rng, self.rule == "greedy", exclude
        )
        if self.cooldown is not None:
            self.cooldown.drawn(chosen)
        return chosen

    def known_success(self) -> np.ndarray:
        """
        The success rate the oracle acts on, shape `(N,)`: the truth per prompt, or with `levels` the rate `q` at
        which `1 - q^G - (1 - q)^G` equals the level's mean chance of a mixed group, the same for all its prompts.
        """
        if self.levels is None:
            return self.p
        if self._known is None:  # once per measurement of the truth
            G = self.group_size
            mixed = 1 - self.p**G - (1 - self.p) ** G
            self._known = _rate_with_mixed_chance(self._level_means(mixed), G)[self._level_of]
        return self._known

    def predicted_success(self, indices=None) -> np.ndarray:
        """What it knows as a success rate: the truth per prompt, or each level's mean success."""
        p = self.p if self.p is not None else np.asarray(self.truth(), float)
        if self.levels is not None:
            p = self._level_means(p)[self._level_of]
        return p.copy() if indices is None else p[np.asarray(indices)]

    def _level_means(self, values: np.ndarray) -> np.ndarray:
        """The mean of `values` (shape `(N,)`) over each level's prompts, shape `(levels,)`."""
        return np.bincount(self._level_of, values) / np.bincount(self._level_of)


def _rate_with_mixed_chance(u: np.ndarray, G: int) -> np.ndarray:
    """
    The `q` in `[0, 1/2]` with `1 - q^G - (1 - q)^G = u`, elementwise (the chance of a mixed group rises on that
    interval), by 60 bisection steps.
    """
    lo, hi = np.zeros_like(u), np.full_like(u, 0.5)
    for _ in range(60):
        mid = (lo + hi) / 2
        below = 1 - mid**G - (1 - mid) ** G < u
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return (lo + hi) / 2


class Redrawn(_BenchmarkSelector):
    """
    `B` distinct prompts of `allowed` (shape `(K,)`) drawn uniformly at random every batch, independently of the
    batches before (the offline filter's kept prompts without its epochs: a prompt may come back the next batch, or
    not for a long while). Learns nothing; predicts one half for every prompt.
    """

    def __init__(self, num_prompts: int, allowed: np.ndarray, seed: int):
        self.num_prompts, self.allowed = num_prompts, np.asarray(allowed, dtype=np.int64)
        self.rng = np.random.default_rng(seed)

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        free = self.allowed if exclude is None else self.allowed[~np.isin(self.allowed, np.asarray(exclude))]
        return self.rng.choice(free, size=batch_size, replace=False)

    def predicted_success(self, indices=None) -> np.ndarray:
        return np.full(self.num_prompts if indices is None else len(indices), 0.5)


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
                (kept if 0 < rate < 1 else rejected).append(index)
        return np.array((kept + rejected)[:batch_size])

    def update(self, indices, successes, trials) -> None:
        trials = np.asarray(trials)
        seen = trials > 0
        self.last[np.asarray(indices)[seen]] = np.asarray(successes)[seen] / trials[seen]

    def predicted_success(self, indices=None) -> np.ndarray:
        return self.last.copy() if indices is None else self.last[np.asarray(indices)]


class ChosenAhead:
    """
    `selector`, but every batch it returns was chosen `ahead - 1` calls earlier, from what it knew then; the batches
    chosen and not yet returned are excluded from later choices, as pending ones are. The synchronous trainer's data
    loader already asks for a batch one step before the previous one is scored (the engine's lag 1), so a batch is
    chosen `ahead` updates before the policy that generates it, as in an asynchronous trainer whose worker runs
    `ahead` versions ahead. Everything else (`predict`, `update`, `predicted_success`, ...) is `selector`'s.
    """

    def __init__(self, selector, ahead: int):
        self.selector, self.queued = selector, ahead - 1
        self.chosen: deque[np.ndarray] = deque()

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        while len(self.chosen) <= self.queued:
            taken = [*self.chosen] + ([] if exclude is None else [np.asarray(exclude, np.int64)])
            self.chosen.append(self.selector.select(batch_size, exclude=np.concatenate(taken) if taken else None))
        return self.chosen.popleft()

    def __getattr__(self, name):
        if name in ("selector", "queued", "chosen"):  # not yet set (copying, unpickling)
            raise AttributeError(name)
        return getattr(self.selector, name)


def _distinct_prompts(train) -> tuple[int, np.ndarray]:
    """The distinct prompts of `train` and each row's prompt, `(P, (N,))` (rows repeat prompts under `copies`)."""
    _, row_prompt = np.unique(np.asarray(train["prompt"]), return_inverse=True)
    return int(row_prompt.max()) + 1, row_prompt


def profiled_pass_rates(setting, model, seed: int) -> np.ndarray:
    """
    Each training row's pass rate in `PROFILE_SAMPLES` samples of `model` (the warm start), `(N,)`: per distinct
    prompt, Binomial(`PROFILE_SAMPLES`, p) / `PROFILE_SAMPLES` of its exact true success `p`, seeded by `seed`; the
    rows of one prompt share its rate.
    """
    count, row_prompt = _distinct_prompts(setting.train)
    p = np.empty(count)
    p[row_prompt] = np.asarray(setting.true_success(model, setting.train), float)
    solved = np.random.default_rng([seed, PROFILE_STREAM]).binomial(PROFILE_SAMPLES, p)
    return (solved / PROFILE_SAMPLES)[row_prompt]


def kept_rows(setting, model, seed: int) -> np.ndarray:
    """The training rows `offline_filter` keeps on its profile (`profiled_pass_rates` of `model`, the warm start, with
    `seed`): neither 0/8 nor 8/8, by the library's own rule (`OfflineFilterSelector`). Shape `(K,)`, int64."""
    return OfflineFilterSelector(len(setting.train), profiled_pass_rates(setting, model, seed), seed=seed).kept


def filtered(setting, model, seed: int):
    """`setting` with only the training rows `offline_filter` keeps on the same profile (`kept_rows`)."""
    return dataclasses.replace(setting, train=setting.train.select(kept_rows(setting, model, seed)))


def profiling_rollouts(method: str, setting) -> int:
    """The rollouts `method` spent before training: `PROFILE_SAMPLES` per distinct prompt for those `PROFILED`."""
    return PROFILE_SAMPLES * _distinct_prompts(setting.train)[0] if base_method(method) in PROFILED else 0


def policy_embeddings(model, tokenizer, prompts, batch_size: int = 256) -> np.ndarray:
    """Each prompt's mean last-layer hidden state under `model`, shape `(N, hidden)`, float32."""
    import torch

    rows = []
    with torch.no_grad():
        for start in range(0, len(prompts), batch_size):
            encoded = tokenizer(
                list(prompts[start : start + batch_size]), return_tensors="pt", padding=True, add_special_tokens=False
            )
            hidden = model(**encoded, output_hidden_states=True).hidden_states[-1]
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            rows.append(((hidden * mask).sum(1) / mask.sum(1)).float().numpy())
    return np.concatenate(rows)


def build(method: str, setting, model, seed: int):
    """
    `(selector, config)` for `KGPSCallback(config, selector=selector)`: a library name or a benchmark-only selector
    that reads `model` (the policy being trained) for its truth or its screening.
    """
    method = base_method(method)
    if method in ONE_LINE:
        return None, ONE_LINE_CONFIGS.get(method, KGPSConfig())
    G = setting.regime.num_generations * WIDE.get(method.partition("@")[0], 1)  # the group the oracles draw for
    config = variant_config({"kgps": "kgps:level", "kgps_global": "kgps"}.get(method, method))
    if config is not None:
        return "kgps", config
    if method == "ds":
        from trl_kgps.tasks.evaluation import success_rates

        def screen(indices):
            rows = setting.train.select(indices)
            return success_rates(
                model, setting.tokenizer, rows["prompt"], setting.reward, {"answer": rows["answer"]}, samples=G,
                max_new_tokens=4, seed=int(selector.rng.integers(2**31)),
            )  # fmt: skip

        selector = DynamicSampling(len(setting.train), screen, seed)
        return selector, KGPSConfig()
    name, _, refresh = method.partition("@")
    if name in ORACLES:
        truth = lambda: setting.true_success(model, setting.train)  # noqa: E731
        levels = setting.true_levels if name == "oracle_level" else None
        rules = {
            "oracle_greedy": "greedy",
            "oracle_dealt": "dealt",
            "oracle_cooldown": "cooldown",
            "oracle_sizes": "sizes",
        }
        rule = rules.get(name, "proportional")
        return Oracle(len(setting.train), truth, G, int(refresh or 1), seed, rule, levels), KGPSConfig(warmup_epochs=0)
    if method in ("uniform", "mopps", "greso", "dps", "arcus"):
        return method, KGPSConfig()
    if method in AHEAD:
        config = variant_config("kgps:level")
        return ChosenAhead(selector_for("kgps", setting.train, config, seed), AHEAD[method]), config
    if method in DPS_RECIPES:
        return DPSSelector(len(setting.train), seed=seed, **DPS_RECIPES[method]), KGPSConfig()
    if method == "offline_filter":
        rates = profiled_pass_rates(setting, model, seed)
        return OfflineFilterSelector(len(setting.train), rates, seed=seed), KGPSConfig()
    if method in REDRAWN:
        return Redrawn(len(setting.train), kept_rows(setting, model, seed), seed), KGPSConfig()
    if method in PRACTICE:
        return method, KGPSConfig()
    raise ValueError(f"unknown method {method!r}: choose among {SUITE + OTHERS} or {sorted(VARIANTS)}.")
