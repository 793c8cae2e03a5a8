r"""
A simulated RL run whose prompt success rates drift as the policy learns, to measure prompt selectors without a GPU.

The policy is a logit \\(\psi_i\\) per prompt. A step `t` (of `T`) selects `B` prompts, rolls each out `k` times
(\\(s_i \sim \mathrm{Binomial}(k, \sigma(\psi_i))\\)), then moves every prompt by an update of size
\\(\eta_t = \eta \cdot \tfrac12 (1 + \cos(\pi t / T))\\) (a cosine learning-rate schedule):

    psi_i <- psi_i + eta_t * (shared_drift + shared_noise * z + prompt_noise * z_i + trained_drift * 4 v_i)

with \\(z, z_i \sim \mathcal{N}(0, 1)\\) drawn each step (\\(z\\) once for all prompts) and
\\(v_i = (s_i / k)(1 - s_i / k)\\) the reward variance of a trained prompt's group (0 for prompts not trained on): as
in GRPO, a group whose rollouts all agree has no advantage and teaches nothing. The parameter-update norm the
selectors see is \\(\lVert \Delta\theta \rVert = \texttt{norm\_scale} \cdot \eta_t\\). Initial logits are
\\(\mathcal{N}(\texttt{initial\_mean}, \texttt{initial\_spread}^2)\\). The first `num_prompts // B` steps are a
uniform warmup epoch for every method but the oracles and KGPS configured without one (the default), which select
from the first step; every method is measured over the steps after it, at the rollouts it has spent.

`DS` (DAPO dynamic sampling) draws prompts in TRL's order, rolls each out, and keeps only groups with `0 < s < k`
until it has `B`; every rollout it spends counts. `oracle` knows every \\(\psi_i\\) and draws the `B` prompts with
probabilities proportional to that of a mixed group, \\(1 - p^k - (1 - p)^k\\) (`oracle_greedy`: the `B` most
likely); neither needs a warmup.

**Levels** (the `cpu` scenario: the shape of the real CPU testbed's `base` regime, its learning knobs fitted by
`benchmarks/calibrate_simulator.py` to the testbed's results committed at d5e049e; it ranks the oracle below
uniform, so it shows locking and forgetting but does not judge selectors). With
`level_means` set, the prompts are split evenly into levels whose logits start at
\\(\mathcal{N}(\texttt{level\_means}_l, \texttt{initial\_spread}^2)\\). What a batch teaches transfers to every
prompt of its level, saturating at a `ceiling` logit; training the other levels makes a level forget a little; and
training the same prompts again and again makes every prompt forget. With
\\(g_l = \tfrac1B \sum_{j \in \text{batch, level } l} 4 v_j\\), \\(g = \sum_l g_l\\) and
\\(r = \tfrac1B \sum_{j \in \text{batch}} 4 v_j c_j\\) (\\(c_j\\): the times prompt \\(j\\) was trained before),
every prompt of level \\(l\\) also moves by

    eta_t * (level_transfer * g_l * (ceiling - psi_i) - forgetting * (g - g_l) - repeat_forgetting * r)

`heldout_prompts` more prompts per level are never trained; they follow the level's moves (and the noise), and
their mean success is the held-out accuracy (`Trace.heldout`). `schedule="linear"` decays the learning rate
linearly to 0, as TRL's default scheduler does.

**The engine.** Every method runs in the `SelectionEngine` that training runs (`trl_kgps.engine.engine`): it chooses
each batch (the warmup's, then the selector's), feeds the outcomes to the selector and returns the batch's `kgps/*`
metrics, which the trace takes its estimation and locking measurements from, and widens the beliefs. Unlike
training, each batch is scored before the next is chosen (lag 0). DS and the oracles run in it as selectors too:
DS's `select` rolls its candidates out, the oracle's reads the logits.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from ..engine.engine import SelectionEngine
from ..engine.ledger import BatchLedger
from ..selectors import build_selector
from ..selectors.registry import BUILT_IN
from .variants import VARIANTS, variant_config


@dataclass(frozen=True)
class Scenario:
    """The knobs of a simulated run (see the module docstring for the equations)."""

    name: str = "base"
    num_prompts: int = 2000
    batch_size: int = 64
    rollouts: int = 8
    initial_mean: float = -1.0
    initial_spread: float = 2.0
    learning_rate: float = 0.01
    shared_drift: float = 1.0
    trained_drift: float = 5.0
    prompt_noise: float = 2.0
    shared_noise: float = 0.3
    norm_scale: float = 10.0
    level_means: tuple[float, ...] = ()
    level_transfer: float = 0.0
    ceiling: float = 4.0
    forgetting: float = 0.0
    heldout_prompts: int = 0
    repeat_forgetting: float = 0.0
    schedule: str = "cosine"

    def __post_init__(self):
        if self.schedule not in ("cosine", "linear"):
            raise ValueError(f"schedule must be 'cosine' or 'linear', got {self.schedule!r}.")
        if self.heldout_prompts and not self.level_means:
            raise ValueError("heldout_prompts needs level_means: held-out prompts follow their level's moves.")


# Shaped like the real CPU testbed's `base` regime (`benchmarks/real_cpu.py`): 4 levels from solved to out of reach,
# 512 prompts, 4 per step, 400 steps (128 of them the warmup epoch) at a linearly decaying learning rate. The knobs
# were fitted to the testbed's results committed at d5e049e, an earlier version of it, by `python
# benchmarks/calibrate_simulator.py` (benchmarks/results/calibration.md); the fit puts the oracle below uniform, so
# this scenario is not a judge of selectors.
CPU = Scenario(
    name="cpu",
    num_prompts=512,
    batch_size=4,
    rollouts=8,
    level_means=(3.816, -0.627, -1.179, -13.771),
    initial_spread=0.484,
    learning_rate=0.01,
    shared_drift=0.0,
    shared_noise=0.0,
    trained_drift=17.4768,
    prompt_noise=0.8456,
    level_transfer=2.1778,
    ceiling=3.0064,
    forgetting=2.1981,
    repeat_forgetting=0.1455,
    heldout_prompts=256,
    norm_scale=10.0,
    schedule="linear",
)

SCENARIOS = {
    "base": Scenario(),
    "shared": Scenario(name="shared", shared_drift=2.0, trained_drift=1.0, prompt_noise=0.5, shared_noise=1.0),
    "per_prompt": Scenario(name="per_prompt", shared_drift=0.2, trained_drift=5.0, prompt_noise=6.0, shared_noise=0.0),
    "static": Scenario(
        name="static", shared_drift=0.0, trained_drift=0.0, prompt_noise=0.0, shared_noise=0.0, norm_scale=0.0
    ),
    "cpu": CPU,
}

# The built-in selectors, never one registered on import (`registry.REGISTERED_ON_IMPORT`): the same whatever imported.
METHODS = (*VARIANTS, *(name for name in BUILT_IN if name != "kgps"), "ds", "oracle", "oracle_greedy")
# A KGPS variant named with this suffix (`kgps:level`) shares across prompts by their level, in scenarios with levels.
LEVEL = ":level"


@dataclass
class Trace:
    """Per-step measurements of one simulated run, each a list over steps after warmup."""

    mae: list[float] = field(default_factory=list)
    spearman: list[float] = field(default_factory=list)
    mae_true: list[float] = field(default_factory=list)
    informative_share: list[float] = field(default_factory=list)
    repeats: list[float] = field(default_factory=list)
    rollouts: list[int] = field(default_factory=list)
    success: list[float] = field(default_factory=list)
    coverage: list[float] = field(default_factory=list)
    # With levels, from the initial state on, warmup included (steps + warmup + 1 entries): the held-out accuracy,
    # and each level's mean success over the pool.
    heldout: list[float] = field(default_factory=list)
    level_success: list[list[float]] = field(default_factory=list)


def oracle_batch(
    p: np.ndarray, rollouts: int, batch_size: int, rng: np.random.Generator, greedy: bool, exclude=None
) -> np.ndarray:
    """
    The oracles' choice, knowing every prompt's success rate `p` (shape `(N,)`): prompts likely to give a mixed group
    of `rollouts`, `u = 1 - p^k - (1 - p)^k`. `batch_size` distinct draws with probabilities proportional to `u`
    (Gumbel top-k), or with `greedy` the `batch_size` largest `u`, ties in random order; never one of `exclude`.
    """
    mixed = 1 - p**rollouts - (1 - p) ** rollouts
    if greedy:
        key = mixed + 1e-12 * rng.random(p.size)  # random among ties
    else:
        with np.errstate(divide="ignore"):  # the largest log(u) + Gumbel noise: a draw proportional to u
            key = np.log(np.maximum(mixed, 0.0)) + rng.gumbel(size=p.size)
    if exclude is not None:
        key[np.asarray(exclude)] = -np.inf
    return np.argsort(-key, kind="stable")[:batch_size]


class _SimulatorLedger(BatchLedger):
    """The warmup in the simulator's own order: one permutation from its stream `[seed, 2]`, not the trainers'
    `[seed, epoch]`, so that its recorded runs replay."""

    def warmup_order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, 2]).permutation(self.num_prompts)


class _SimulatorEngine(SelectionEngine):
    ledger_class = _SimulatorLedger


class _Oracle:
    """
    Knows every prompt's logit `psi` (the simulator's array, which it moves in place) and chooses by `oracle_batch`;
    `oracle_greedy` takes the most likely. A selector for the engine, which it runs without a warmup; it learns
    nothing from the outcomes.
    """

    def __init__(self, psi: np.ndarray, rollouts: int, seed: int, greedy: bool):
        self.psi, self.k, self.greedy, self.rng = psi, rollouts, greedy, np.random.default_rng([seed, 4])
        self.num_prompts = psi.size

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        return oracle_batch(1 / (1 + np.exp(-self.psi)), self.k, batch_size, self.rng, self.greedy, exclude)

    def predicted_success(self, indices: np.ndarray) -> np.ndarray:
        return 1 / (1 + np.exp(-self.psi[indices]))

    def initialize(self, indices, successes, trials) -> None:
        pass

    def update(self, indices, successes, trials) -> None:
        pass

    def predict(self, delta_norm) -> None:
        pass


class _DynamicSampling:
    """
    DS as a selector for the engine: its `select` rolls out candidates in `uniform`'s order (TRL's), drawing from the
    simulator's `world` with its logits `psi` (moved in place), and returns the `B` groups it kept; `take()` hands the
    simulator their successes and the rollouts spent on them, so that the batch is not rolled out again. The
    outcomes, the warmup and the beliefs are `uniform`'s.
    """

    def __init__(self, uniform, psi: np.ndarray, rollouts: int, world: np.random.Generator):
        self.uniform, self.psi, self.k, self.world = uniform, psi, rollouts, world
        self.num_prompts = uniform.num_prompts
        self._drawn: tuple[np.ndarray, int] | None = None

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        batch, successes, used = _dynamic_sampling(self.uniform, self.psi, batch_size, self.k, self.world, exclude)
        self._drawn = (successes, used)
        return batch

    def take(self) -> tuple[np.ndarray, int] | None:
        """The successes `(B,)` of the batch `select` last returned and the rollouts spent on it, once; else `None`."""
        drawn, self._drawn = self._drawn, None
        return drawn

    def predicted_success(self, indices=None) -> np.ndarray:
        return self.uniform.predicted_success(indices)

    def initialize(self, indices, successes, trials) -> None:
        self.uniform.initialize(indices, successes, trials)

    def update(self, indices, successes, trials) -> None:
        self.uniform.update(indices, successes, trials)

    def predict(self, delta_norm) -> None:
        self.uniform.predict(delta_norm)


def _selector(method: str, config, num_prompts: int, seed: int, level: np.ndarray | None = None):
    """`config`: the method's `variant_config`. DS draws its candidates in TRL's order: a uniform selector."""
    if config is not None:
        features = {"level": level} if config.feature_columns == ["level"] else None
        return build_selector("kgps", num_prompts, config, seed, features)
    return build_selector("uniform" if method == "ds" else method, num_prompts, seed=seed)


def simulate(method: str, scenario: Scenario, steps: int, seed: int = 0) -> Trace:
    """Runs `method` (one of `METHODS`) for `steps` steps after the warmup epoch's length; returns its `Trace`."""
    config = variant_config(method)  # None for the baselines, DS and the oracles
    by_level = config is not None and config.feature_columns == ["level"]
    if method not in METHODS and not by_level:
        raise ValueError(f"method must be one of {METHODS}, or a KGPS variant with {LEVEL!r}, got {method!r}.")
    if by_level and not scenario.level_means:
        raise ValueError(f"{method!r} shares by level, but scenario {scenario.name!r} has no levels (level_means).")
    world = np.random.default_rng([seed, 1])  # the policy and the rollouts: identical across methods
    B, k = scenario.batch_size, scenario.rollouts
    if scenario.level_means:
        level = np.arange(scenario.num_prompts) % len(scenario.level_means)
        psi = world.normal(np.asarray(scenario.level_means)[level], scenario.initial_spread)
        held = np.random.default_rng([seed, 3])  # apart, so that held-out prompts leave the pool's draws alone
        heldout_level = np.repeat(np.arange(len(scenario.level_means)), scenario.heldout_prompts)
        heldout = held.normal(np.asarray(scenario.level_means)[heldout_level], scenario.initial_spread)
    else:
        psi = world.normal(scenario.initial_mean, scenario.initial_spread, scenario.num_prompts)
    oracle = method.startswith("oracle")
    # The oracles, and KGPS configured without a warmup, select from the first step.
    no_warmup = oracle or (config is not None and config.warmup_epochs == 0)
    if oracle:
        selector = _Oracle(psi, k, seed, greedy=method == "oracle_greedy")
    else:
        selector = _selector(method, config, scenario.num_prompts, seed, level if scenario.level_means else None)
    dynamic = _DynamicSampling(selector, psi, k, world) if method == "ds" else None
    warmup = scenario.num_prompts // B
    total = warmup + steps
    engine = _SimulatorEngine(dynamic if dynamic is not None else selector, B, 0 if no_warmup else warmup, seed)
    trace, spent, trials = Trace(), 0, np.full(B, k)
    if scenario.level_means:
        times_trained = np.zeros(scenario.num_prompts)
        _record_levels(trace, psi, heldout, level)
    for t in range(total):
        batch = engine.choose()
        drawn = dynamic.take() if dynamic is not None else None  # DS rolled its batch out as it chose it
        if drawn is None:
            s, used = world.binomial(k, 1 / (1 + np.exp(-psi[batch]))), B * k
        else:
            s, used = drawn
        spent += used
        scored, metrics = engine.observe(batch, s, trials)
        if t >= warmup:  # the oracle selects from the first step; every method is measured after the warmup
            truth = 1 / (1 + np.exp(-psi[batch]))
            trace.mae.append(metrics["kgps/mae"])
            trace.mae_true.append(float(np.abs(scored.predicted - truth).mean()))
            trace.spearman.append(metrics.get("kgps/spearman", float("nan")))  # left out where undefined
            trace.informative_share.append(metrics["kgps/informative"])
            trace.repeats.append(metrics["kgps/repeats"])
        variance = (s / k) * (1 - s / k)
        if scenario.schedule == "linear":
            eta = scenario.learning_rate * (1 - t / total)
        else:
            eta = scenario.learning_rate * 0.5 * (1 + math.cos(math.pi * t / total))
        step = (
            scenario.shared_drift
            + scenario.shared_noise * world.normal()
            + scenario.prompt_noise * world.normal(size=psi.size)
        )
        step[batch] += scenario.trained_drift * 4 * variance
        if scenario.level_means:
            # g_l: the batch's summed reward variance 4v on level l, per prompt of the batch
            g = np.bincount(level[batch], weights=4 * variance, minlength=len(scenario.level_means)) / B
            # r: the same summed 4v, each prompt's weighted by how often it was trained before
            r = float(np.sum(4 * variance * times_trained[batch])) / B
            times_trained[batch] += 1
            step += _level_moves(scenario, g, level, psi) - scenario.repeat_forgetting * r
            heldout += eta * (
                _level_moves(scenario, g, heldout_level, heldout)
                - scenario.repeat_forgetting * r
                + scenario.prompt_noise * held.normal(size=heldout.size)
            )
        psi += eta * step
        if scenario.level_means:
            _record_levels(trace, psi, heldout, level)
        # The engine widens the beliefs once the warmup's last batch is scored; the simulator has always moved the
        # policy by that batch without widening them, and starts with the first step after the warmup.
        if t >= warmup or no_warmup:
            engine.predict(scenario.norm_scale * eta)
        if t >= warmup:
            trace.rollouts.append(spent)
            trace.success.append(float(np.mean(1 / (1 + np.exp(-psi)))))
            trace.coverage.append(metrics["kgps/coverage"])
    return trace


def _record_levels(trace: Trace, psi: np.ndarray, heldout: np.ndarray, level: np.ndarray) -> None:
    p = 1 / (1 + np.exp(-psi))
    trace.level_success.append((np.bincount(level, weights=p) / np.bincount(level)).tolist())
    if heldout.size:
        trace.heldout.append(float(np.mean(1 / (1 + np.exp(-heldout)))))


def _level_moves(scenario: Scenario, g: np.ndarray, level: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """Per prompt, `level_transfer * g_l * (ceiling - psi) - forgetting * (g - g_l)` (before the step size)."""
    return scenario.level_transfer * g[level] * (scenario.ceiling - psi) - scenario.forgetting * (g.sum() - g[level])


def _dynamic_sampling(selector, psi, B, k, world, exclude=None):
    """
    DAPO's dynamic sampling: roll out candidates in uniform order, keep groups with 0 < s < k, until B are kept.
    Returns the kept prompts `(B,)`, their successes `(B,)` and the rollouts spent; never one of `exclude`.
    """
    kept, outcomes, used = [], [], 0
    for _ in range(50):  # at most 50 candidate batches a step, then the batch is topped up with what was drawn
        excluded = kept if exclude is None else [*np.asarray(exclude).tolist(), *kept]
        candidates = selector.select(B, exclude=np.asarray(excluded, dtype=np.int64))
        s = world.binomial(k, 1 / (1 + np.exp(-psi[candidates])))
        used += B * k
        mixed = (s > 0) & (s < k)
        take = min(B - len(kept), int(mixed.sum()))
        kept += candidates[mixed][:take].tolist()
        outcomes += s[mixed][:take].tolist()
        if len(kept) == B:
            break
    else:
        fill = B - len(kept)
        kept += candidates[~mixed][:fill].tolist()
        outcomes += s[~mixed][:fill].tolist()
    return np.asarray(kept, dtype=np.int64), np.asarray(outcomes), used


def summarize(traces: list[Trace]) -> dict[str, dict[str, float]]:
    """Mean and standard deviation over seeds of each run's average (rollouts and success: their final value)."""
    summary = {}
    for name in ("mae", "spearman", "mae_true", "informative_share", "repeats"):
        per_seed = [float(np.nanmean(getattr(t, name))) for t in traces]
        summary[name] = {"mean": float(np.mean(per_seed)), "std": float(np.std(per_seed))}
    for name in ("rollouts", "success", "coverage", "heldout"):
        if not all(getattr(t, name) for t in traces):
            continue
        per_seed = [float(getattr(t, name)[-1]) for t in traces]
        summary[{"success": "final_success", "heldout": "final_heldout"}.get(name, name)] = {
            "mean": float(np.mean(per_seed)),
            "std": float(np.std(per_seed)),
        }
    return summary
