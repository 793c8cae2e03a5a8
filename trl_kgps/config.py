"""Hyperparameters of Kalman-Guided Prompt Selection."""

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np


OBSERVATIONS = ("binomial", "logit")
SELECTIONS = ("sample", "top")
SEE_PRESETS = "use one of those (KGPSConfig() holds the measured default, KGPSConfig.paper() the paper's choices)"

# What `KGPSConfig.paper()` sets: the paper's method, exactly as published (App. B and Algorithm 1).
PAPER = {
    "initial_variance": 1.0,
    "warmup_epochs": 1,
    "observation": "logit",
    "selection": "top",
    "selection_temperature": 1.0,
    "candidates": 0.0,
    "delta_norm_sample": 1.0,
    "feature_columns": None,
    "shared_variance": 0.0,
    "process_noise_adaptation": 0.0,
}
# One filter per prompt, the batch drawn among 16 B random candidates: the default of trl-kgps 0.2.
# Its gamma fixed, as measured.
PER_PROMPT = {
    "shared_variance": 0.0,
    "candidates": 16.0,
    "initial_variance": 4.0,
    "selection_temperature": 0.5,
    "process_noise_adaptation": 0.0,
}
# The fields `KGPSConfig` leaves to the dataset: left at `None`, each takes one of these values once the train dataset
# is known (`KGPSConfig.resolved`); a value set is never changed.
# With metadata columns (or a prior column) to share by, and wherever a selector is built without a dataset: the shared
# factor, gamma calibrated online, the draw in proportion to the utility (measured: docs/benchmarks.md).
WITH_METADATA = {
    "shared_variance": 1.0,
    "initial_variance": 1.0,
    "selection_temperature": 1.0,
    "process_noise_adaptation": 0.05,
}
# With none: the per-prompt filter, drawn over the whole pool (measured above one factor shared by the whole pool
# without a column: docs/benchmarks.md), its gamma fixed.
NO_METADATA = {
    "shared_variance": 0.0,
    "initial_variance": 4.0,
    "selection_temperature": 0.5,
    "process_noise_adaptation": 0.0,
}

# The largest logit variance a field may set, and one round's process noise Q may add (`SelectionEngine.predict`):
# the beliefs are float32 (largest value 3.4e38) and grow by Q every round. 1e12, a logit standard deviation of a
# million, is far past any useful prior (at a standard deviation of 10, sigma(psi) is already near 0 or 1 for most of
# it) and leaves 26 orders of magnitude before float32 overflows and the beliefs turn NaN.
MAX_LOGIT_VARIANCE = 1e12

# The most Gauss-Hermite nodes `quadrature_points` may ask for. numpy's `hermgauss` finds n nodes as the eigenvalues of
# an n x n matrix (80 kB at 100, 8 TB at a million) and is documented as tested up to 100, where its weights still sum
# to sqrt(pi) within 1e-15; the utility's integrand is smooth, so 5 nodes (the paper) already score it closely.
MAX_QUADRATURE_POINTS = 100


def refusal(name: str, value, requirement: str, fix: str) -> ValueError:
    """
    `ValueError("{name} must {requirement}, got {value!r}: {fix}.")`, or `". {fix}."` when the fix starts a sentence of
    its own.
    """
    return ValueError(f"{name} must {requirement}, got {value!r}{'. ' if fix[0].isupper() else ': '}{fix}.")


def is_real(value) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def is_integer(value) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def are_names(value, many: bool = False) -> bool:
    """A non-empty str; with `many`, also a list or tuple of distinct ones, or an empty one."""
    if many and isinstance(value, (list, tuple)) and not value:
        return True
    names = [value] if isinstance(value, str) else value if many and isinstance(value, (list, tuple)) else []
    return bool(names) and all(isinstance(name, str) and name for name in names) and len(set(names)) == len(names)


def optional(accepts: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """`accepts`, and `None` too: a field left to the dataset, or read only when set."""
    return lambda value: value is None or accepts(value)


def number(low: float = -math.inf, high: float = math.inf, above: bool = False) -> Callable[[Any], bool]:
    """Accepts a finite int or float, not a bool, in `[low, high]`; in `(low, high]` with `above`."""
    return lambda value: is_real(value) and (value > low if above else value >= low) and value <= high


def integer(low: float = -math.inf, high: float = math.inf) -> Callable[[Any], bool]:
    """Accepts an int, not a bool, in `[low, high]`."""
    return lambda value: is_integer(value) and low <= value <= high


def fraction(above: bool = False) -> Callable[[Any], bool]:
    """Accepts a Python number in `[0, 1]` (`(0, 1]` with `above`), compared as Python compares numbers: bools too."""
    return lambda value: isinstance(value, (int, float)) and (value > 0 if above else value >= 0) and value <= 1


class Check(NamedTuple):
    """A field's own check: its value passes `accepts`, or the config is refused with `refusal(field, value, ...)`."""

    field: str
    accepts: Callable[[Any], bool]
    requirement: str
    fix: str

    def __call__(self, config: "KGPSConfig") -> ValueError | None:
        value = getattr(config, self.field)
        return None if self.accepts(value) else refusal(self.field, value, self.requirement, self.fix)


class Choice(NamedTuple):
    """A field holds one of the `choices` its metadata lists (a subclass's field may list more), or is refused."""

    field: str
    fix: str

    def __call__(self, config: "KGPSConfig") -> ValueError | None:
        value = getattr(config, self.field)
        choices = tuple(config.__dataclass_fields__[self.field].metadata["choices"])
        return None if value in choices else refusal(self.field, value, f"be one of {choices}", self.fix)


def rows_weigh_a_draw(config: "KGPSConfig") -> ValueError | None:
    """`copies_weight="rows"` weighs the draw of `selection="sample"`; the other selections draw nothing."""
    if config.copies_weight == "rows" and config.selection != "sample":
        return refusal(
            "copies_weight",
            config.copies_weight,
            f"go with selection='sample', whose draw it weighs (selection={config.selection!r} draws nothing)",
            "use selection='sample', or copies_weight='prompt'",
        )
    return None


# `KGPSConfig`'s checks of its fields, in their declaration order: the first that fails refuses the config, so that the
# message names the first field, in that order, that holds a value it does not accept.
FIELD_CHECKS = (
    Check(
        "gamma",
        number(0, MAX_LOGIT_VARIANCE),
        f"be a finite number >= 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
        "use a non-negative value such as the paper's 0.1",
    ),
    Check(
        "process_noise_adaptation",
        optional(number(0)),
        "be a finite number >= 0.0",
        "use 0 to keep gamma fixed, or a small step size such as 0.05",
    ),
    Check(
        "initial_variance",
        optional(number(0, MAX_LOGIT_VARIANCE, above=True)),
        f"be a finite number > 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
        "use a positive logit variance such as the paper's 1.0",
    ),
    Check("warmup_epochs", integer(0), "be an integer >= 0", "use 1 (the paper) or 0 (no warmup)"),
    Choice("observation", SEE_PRESETS),
    Choice("selection", SEE_PRESETS),
    Check(
        "selection_temperature",
        optional(number(0, above=True)),
        "be a finite number > 0.0",
        "use a positive value such as 1",
    ),
    Check(
        "candidates",
        number(0),
        "be a finite number >= 0.0",
        "use a multiple of the batch size such as 16, or 0 to choose among all prompts",
    ),
    Check(
        "candidates",
        lambda value: not 0 < value < 1,
        "be 0 or at least 1 (a multiple of the batch size)",
        "use e.g. 16, or 0 to choose among all prompts",
    ),
    Check(
        "feature_columns",
        optional(lambda value: are_names(value, many=True)),
        "be distinct column names of the train dataset",
        "use e.g. ['level', 'type'], [] for one factor shared by all prompts, or None to find them",
    ),
    Check(
        "prior_column",
        optional(are_names),
        "be a column name of the train dataset or None",
        "use e.g. 'solve_rate', or None to read none",
    ),
    Check(
        "prompt_key",
        optional(are_names),
        "be a column name of the train dataset or None",
        "use 'prompt' (the default), an id column, or None for one belief per row",
    ),
    Choice("copies_weight", "use 'prompt' (each distinct prompt weighs once) or 'rows' (copies weigh by their rows)"),
    rows_weigh_a_draw,
    Check(
        "shared_variance",
        optional(number(0, MAX_LOGIT_VARIANCE)),
        f"be a finite number >= 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
        "use a logit variance such as 1, or 0 for one independent filter per prompt (the paper)",
    ),
    Check(
        "shared_noise_share",
        fraction(),
        "lie in [0, 1]",
        "use e.g. 0.5 (half of the process noise to the shared part)",
    ),
    Check(
        "residual_adaptation",
        number(0),
        "be a finite number >= 0.0",
        "use 0 to keep initial_variance, or a small step size such as 0.05",
    ),
    Check("quadrature_points", integer(2), "be an integer >= 2", "use 5 (the paper) or more nodes"),
    Check(
        "quadrature_points",
        integer(high=MAX_QUADRATURE_POINTS),
        f"be an integer <= {MAX_QUADRATURE_POINTS}",
        f"use 5 (the paper) or a few more: numpy's Gauss-Hermite rule is tested up to {MAX_QUADRATURE_POINTS} nodes",
    ),
    Check(
        "success_reward",
        optional(are_names),
        "be the name of a reward function or None",
        "use the name the trainer logs it under (e.g. 'accuracy_reward')",
    ),
    Check("success_threshold", number(), "be a finite number", "use e.g. 0.5 for 0/1 rewards"),
    Check(
        "delta_norm_sample",
        fraction(above=True),
        "lie in (0, 1]",
        "use 1 for the exact norm or a fraction such as 0.01 to save memory",
    ),
)


def features_need_a_shared_part(config: "KGPSConfig") -> ValueError | None:
    """Feature columns act only through the shared part."""
    if config.feature_columns and config.shared_variance == 0:
        return ValueError(
            f"feature_columns={config.feature_columns!r} needs shared_variance > 0 (it is 0): the features only act "
            "through the shared part. Set shared_variance=1.0, or drop feature_columns."
        )
    return None


def prior_is_no_feature(config: "KGPSConfig") -> ValueError | None:
    """A column read as prior success rates is not also read as labels."""
    if config.prior_column is not None and config.prior_column in (config.feature_columns or ()):
        return ValueError(
            f"prior_column={config.prior_column!r} is also in feature_columns={config.feature_columns!r}: KGPS reads "
            "it as success rates, binned, and as labels it would count the same values twice. Drop it from "
            "feature_columns."
        )
    return None


def prior_needs_a_shared_part(config: "KGPSConfig") -> ValueError | None:
    """Prior success rates start the shared part of each belief."""
    if config.prior_column is not None and config.shared_variance == 0:
        return ValueError(
            f"prior_column={config.prior_column!r} needs shared_variance > 0 (it is 0): the rates start the shared "
            "part of each prompt's belief. Set shared_variance=1.0, or drop prior_column."
        )
    return None


def sharing_needs_binomial(config: "KGPSConfig") -> ValueError | None:
    """The shared factor is updated by the binomial update, not by the paper's update of one prompt at a time."""
    if config.shared_variance != 0 and config.observation == "logit":
        shared = "> 0" if config.shared_variance is not None else "unset (1.0 wherever the dataset has metadata)"
        return ValueError(
            f"shared_variance {shared} (a factor shared across prompts) works with observation='binomial', got "
            "observation='logit', the paper's update of one prompt at a time. Set shared_variance=0 for it (as "
            "KGPSConfig.paper() does)."
        )
    return None


# The checks that read several fields, once each field holds a value it accepts.
CROSS_FIELD_CHECKS = (
    features_need_a_shared_part,
    prior_is_no_feature,
    prior_needs_a_shared_part,
    sharing_needs_binomial,
)


def refuse_first(checks: tuple, config: "KGPSConfig") -> None:
    """Raises the refusal of the first of `checks` that `config` fails."""
    for check in checks:
        error = check(config)
        if error is not None:
            raise error


@dataclass
class KGPSConfig:
    r"""
    Configuration of [`KGPSSelector`]: the measured default and the paper's method.

    `KGPSConfig()` is the default: the paper's filter and utility (`gamma=0.1`, a five-point Gauss–Hermite
    posterior-expected `p(1-p)`) with five modelling departures, each measured (docs/algorithm.md): no warmup epoch,
    the exact binomial update, a factor shared across prompts (by the dataset's metadata columns, which `KGPSCallback`
    finds unless `feature_columns` names them, e.g. `["level"]`, or one factor for the whole pool; its residual prior
    learnt online), gamma calibrated online (`process_noise_adaptation=0.05`), and a batch drawn over the whole pool
    in proportion to the utility instead of the top-B; and the update norm measured on a 1 % sample of the parameters
    (`delta_norm_sample=0.01`; the paper's, exact, is 1). `KGPSConfig.paper()` is the paper's method exactly (App. B:
    `initial_variance=1.0`, one warmup epoch, the top-B over all prompts). Every field name is distinct from
    `trl.GRPOConfig`'s, so both parse together: `TrlParser((GRPOConfig, KGPSConfig))`.

    Four fields are decided from the train dataset when left at `None`, their default: `shared_variance`,
    `initial_variance`, `selection_temperature` and `process_noise_adaptation` (`KGPSConfig.resolved`). When KGPS
    looks for metadata columns (`feature_columns` unset, `shared_variance` not 0) and finds none, nor a
    `prior_column`, they take `NO_METADATA`'s values, the per-prompt filter's (0, 4.0, 0.5 and 0); otherwise, and
    wherever a selector is built without a dataset (`KGPSSelector(n)`), `WITH_METADATA`'s (1.0, 1.0, 1.0 and 0.05). A
    value set, equal to one of those or not, is never changed. `KGPSCallback.effective_config` holds the values a run
    uses, which its state file saves and a resume compares.

    Symbols, as in the paper:

    - process noise, added to every prompt's logit variance after each selection round:
      \\(Q_t = \gamma \sum_{\text{steps}} \lVert \theta_s - \theta_{s-1} \rVert_2\\);
    - prior of a prompt before its first observation, and after its warmup observation: variance
      \\(P_0\\) = `initial_variance`;
    - utility of a prompt: \\(\mathbb{E}_{\psi \sim \mathcal{N}(m, P)}[\sigma(\psi)(1 - \sigma(\psi))]\\) by
      `quadrature_points`-point Gauss–Hermite.

    Parameters:
        gamma (`float`, *optional*, defaults to `0.1`):
            Process-noise scale: \\(Q = \gamma \lVert\Delta\theta\rVert_2\\) is added to every logit variance after
            each policy update. In `[0, 1e12]`.
        process_noise_adaptation (`float` or `None`, *optional*, defaults to `None`):
            Step size \\(\eta\\) of gamma's online calibration: after each batch
            \\(\gamma \leftarrow \gamma\, e^{\eta (\mathrm{NIS} - 1)}\\), within `[1e-3, 1e3]` times `gamma`; 0 keeps
            gamma fixed (the paper). `None`: from the dataset, 0.05 with metadata columns, 0 without.
        initial_variance (`float` or `None`, *optional*, defaults to `None`):
            Prior logit variance of a prompt's own residual (of every prompt with `shared_variance=0`). In
            `(0, 1e12]`. `None`: from the dataset, 1.0 with metadata columns, 4.0 without.
        warmup_epochs (`int`, *optional*, defaults to `0`):
            Epochs of uniform sampling before KGPS selects (the paper: 1).
        observation (`str`, *optional*, defaults to `"binomial"`):
            The update: `"binomial"` (moment-matched exact posterior) or `"logit"` (the paper's Kalman update).
        shared_variance (`float` or `None`, *optional*, defaults to `None`):
            Prior logit variance of the part prompts share; 0 for one filter per prompt. In `[0, 1e12]`. `None`: from
            the dataset, 1.0 with metadata columns, 0 (one filter per prompt) without.
        feature_columns (`list[str]` or `None`, *optional*, defaults to `None`):
            Train-dataset columns prompts share; `None` finds them, `[]` shares one factor across the pool.
        prior_column (`str` or `None`, *optional*, defaults to `None`):
            Column of another model's success rates in `[0, 1]` each belief starts from; `None` reads none.
        prompt_key (`str` or `None`, *optional*, defaults to `"prompt"`):
            Column whose equal values mark copies of one prompt, which share one belief; `None`: one per row.
        copies_weight (`str`, *optional*, defaults to `"prompt"`):
            How copies weigh in the draw: `"prompt"` each distinct prompt once (DAPO-Math-17k's 100 copies),
            `"rows"` in proportion to its rows (a mixture upsampled by duplication). Needs `selection="sample"`.
        shared_noise_share (`float`, *optional*, defaults to `0.5`):
            Share of each round's process noise that goes to the shared part. In `[0, 1]`.
        residual_adaptation (`float`, *optional*, defaults to `0.05`):
            Step size of the online estimate of the residual prior variance; 0 keeps `initial_variance`.
        quadrature_points (`int`, *optional*, defaults to `5`):
            Gauss-Hermite nodes of the posterior utility. In `[2, 100]`.
        selection (`str`, *optional*, defaults to `"sample"`):
            `"sample"` draws in proportion to the scores; `"top"` takes the best (the paper).
        selection_temperature (`float` or `None`, *optional*, defaults to `None`):
            With `"sample"`: draws in proportion to score^(1 / temperature). Positive. `None`: from the dataset, 1.0
            with metadata columns, 0.5 without.
        candidates (`float`, *optional*, defaults to `0.0`):
            Candidates per batch as a multiple of the batch size; 0 chooses among all prompts. 0 or at least 1.
        success_reward (`str` or `None`, *optional*, defaults to `None`):
            The reward function whose value decides success; `None`: the weighted sum of all of them.
        success_threshold (`float`, *optional*, defaults to `0.5`):
            A completion succeeds when its reward is at least this.
        delta_norm_sample (`float`, *optional*, defaults to `0.01`):
            Share of the parameters the update norm is measured on; 1 is exact (the paper). In `(0, 1]`.
        restart_on_missing_state (`bool`, *optional*, defaults to `False`):
            On resuming from a checkpoint without KGPS state: start afresh with a warning instead of raising.

    The variants measured and left out, and the paper's ablations, are fields of
    `selectors.experimental.ExperimentalConfig`, for the benchmarks.
    """

    gamma: float = field(
        default=0.1,
        metadata={
            "help": "Process-noise scale gamma: Q = gamma * ||theta_t - theta_{t-1}||_2 is added to every prompt's "
            "logit variance after each policy update (paper App. B: 0.1).",
        },
    )
    process_noise_adaptation: float | None = field(
        default=None,
        metadata={
            "help": "Step size of the online calibration of gamma: after each batch, gamma is multiplied by "
            "exp(rate * (NIS - 1)), NIS being the batch's normalized innovation squared (1 when the spread KGPS "
            "predicted matches the outcomes), so that the drift KGPS assumes matches the surprises it sees; it stays "
            "within [1e-3, 1e3] times the gamma set. 0 keeps gamma fixed (the paper). Unset: decided from the train "
            "dataset, 0.05 when it holds metadata columns to share by, 0 when it holds none.",
        },
    )
    initial_variance: float | None = field(
        default=None,
        metadata={
            "help": "With shared_variance > 0 (sharing): the prior variance of a prompt's own logit residual, "
            "around what its features predict, where residual_adaptation starts from. With shared_variance 0 (the "
            "paper): the logit variance P0 of every prompt before its first observation, set again when its warmup "
            "observation arrives (paper App. B: 1.0). Unset: decided from the train dataset, 1.0 when it holds "
            "metadata columns to share by, 4.0 when it holds none.",
        },
    )
    warmup_epochs: int = field(
        default=0,
        metadata={
            "help": "Epochs of uniform prompt sampling that initialise each prompt's logit mean before KGPS starts "
            "selecting (prompt-selection warmup, unrelated to learning-rate warmup). The paper uses 1; 0 (the "
            "default) selects from the first batch, every prompt starting from the shared prior (mean 0, variance "
            "shared_variance + initial_variance), which then follows what its group has shown.",
        },
    )
    observation: str = field(
        default="binomial",
        metadata={
            "help": "How a group's s successes in k rollouts update a prompt's belief: 'binomial' matches the "
            "moments of the exact posterior N(m, P) x Binomial(s | k, sigmoid(psi)); 'logit' is the paper's Kalman "
            "update on logit(clip(s/k)) with R = 1 / (k p (1 - p)).",
            "choices": list(OBSERVATIONS),
        },
    )
    selection: str = field(
        default="sample",
        metadata={
            "help": "How a batch is chosen from the scored candidates: 'sample' draws without replacement in "
            "proportion to the scores; 'top' takes the best (the paper).",
            "choices": list(SELECTIONS),
        },
    )
    selection_temperature: float | None = field(
        default=None,
        metadata={
            "help": "selection='sample' draws each prompt with probability proportional to score ** (1 / "
            "selection_temperature): 1 is proportional to the score, below 1 sharper (towards 'top'), above 1 "
            "flatter. Unset: decided from the train dataset, 1.0 when it holds metadata columns to share by, 0.5 when "
            "it holds none.",
        },
    )
    candidates: float = field(
        default=0.0,
        metadata={
            "help": "Candidates per batch, as a multiple of the batch size B: each batch is chosen among "
            "ceil(candidates * B) prompts drawn at random, so that a round costs "
            "O(candidates * B) whatever the dataset's size. 0 (the default) chooses among all prompts every round, "
            "as the paper does; with selection='sample' that draw is exact and still costs O(B) on average.",
        },
    )
    feature_columns: list[str] | None = field(
        default=None,
        metadata={
            "help": "Train-dataset columns whose values prompts share, from which KGPS learns across prompts: "
            "categorical columns (e.g. MATH's 'level' and 'type', a mixture's 'source') or one embedding column (a "
            "float vector per prompt). Categorical columns may hold at most 1,024 distinct values in all. Unset: KGPS "
            "finds the dataset's metadata columns itself (labels with few values that no reward function reads) and "
            "logs which; [] reads none: one factor shared by all prompts. Needs shared_variance > 0.",
            "nargs": "+",
        },
    )
    prior_column: str | None = field(
        default=None,
        metadata={
            "help": "Train-dataset column of success rates in [0, 1] measured offline by another model (e.g. "
            "Big-Math's 'llama8b_solve_rate'): each prompt's belief starts from its rate's bin (never solved, tenths, "
            "always solved), and how far each bin's rate holds for this policy is learned from its rollouts. Unset: "
            "none (the log line names a column that looks like one). Needs shared_variance > 0.",
        },
    )
    prompt_key: str | None = field(
        default="prompt",
        metadata={
            "help": "Train-dataset column whose equal values mark copies of one prompt, which share one belief and "
            "are chosen as one (a dataset that repeats its prompts, as DAPO-Math-17k does 100 times); KGPS trains on "
            "a prompt's rows in turn. 'prompt' (the default) compares the prompts as stored (every row is its own "
            "prompt when the dataset holds images, video or audio); an id column groups rows by id; None keeps one "
            "belief per row.",
        },
    )
    copies_weight: str = field(
        default="prompt",
        metadata={
            "help": "How copies of a prompt weigh when the next batch is drawn: 'prompt' (each distinct prompt once, "
            "whatever its rows, as a dataset of 100 copies of every prompt expects) or 'rows' (in proportion to its "
            "rows, as a mixture upsampled by duplication expects). Needs selection='sample'.",
            "choices": ["prompt", "rows"],
        },
    )
    shared_variance: float | None = field(
        default=None,
        metadata={
            "help": "Prior logit variance of the shared part of every prompt's success rate (the part its features "
            "predict); initial_variance is then the prior variance of the prompt's own residual. 0 turns sharing off: "
            "one independent filter per prompt (the paper). Unset: decided from the train dataset, 1.0 when it holds "
            "metadata columns to share by, 0 when it holds none.",
        },
    )
    shared_noise_share: float = field(
        default=0.5,
        metadata={
            "help": "Share of each round's process noise Q = gamma * ||dtheta|| that goes to the shared part (the "
            "rest to every prompt's residual), so that each prompt's logit variance still grows by Q.",
        },
    )
    residual_adaptation: float = field(
        default=0.05,
        metadata={
            "help": "With shared_variance > 0: step size of the online estimate of the residual prior variance (how "
            "far prompts spread around what their features predict), which starts at initial_variance. After each "
            "batch, it is multiplied by exp(rate * (NIS - 1)) over the batch's first observations, so a prior that "
            "proves too confident widens for every prompt not yet seen. 0 keeps initial_variance.",
        },
    )
    quadrature_points: int = field(
        default=5,
        metadata={
            "help": "Number of Gauss-Hermite nodes for the posterior utility (paper: 5).",
        },
    )

    success_reward: str | None = field(
        default=None,
        metadata={
            "help": "Name of the reward function whose value decides whether a completion succeeded (e.g. "
            "'accuracy_reward'). Unset: the trainer's weighted sum of all reward functions.",
        },
    )
    success_threshold: float = field(
        default=0.5,
        metadata={
            "help": "A completion succeeds when its reward (see success_reward) is >= this. 0.5 splits 0/1 rewards, "
            "also with small bonuses or penalties added.",
        },
    )
    delta_norm_sample: float = field(
        default=0.01,
        metadata={
            "help": "Fraction of parameter coordinates kept to measure ||theta_t - theta_{t-1}||. 0.01 keeps one in a "
            "hundred of the trainable parameters (this rank's shard) and estimates the norm (its measured error: "
            "docs/trl.md); 1 is exact and keeps a full copy of them (the paper's preset).",
        },
    )

    restart_on_missing_state: bool = field(
        default=False,
        metadata={
            "help": "When resuming from a checkpoint that holds no KGPS state (saved without KGPSCallback), start the "
            "estimator afresh (with a warning) instead of raising."
        },
    )

    def __post_init__(self):
        for f in fields(self):  # a numpy number (np.float32(0.1), np.int64(1)) is taken as the Python number it holds
            value = getattr(self, f.name)
            if isinstance(value, (np.integer, np.floating)):
                object.__setattr__(self, f.name, value.item())
        self._check_fields()
        for flag in (f.name for f in fields(self) if f.type is bool):
            value = getattr(self, flag)  # a numpy bool is kept as Python's
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(
                    f"{flag} must be True or False, got {value!r}: use a bool, e.g. {flag}=True (on the command line, "
                    f"--{flag} or --{flag} false)."
                )
            object.__setattr__(self, flag, bool(value))
        if self.feature_columns is not None:
            columns = self.feature_columns
            # object.__setattr__: this instance is being checked; `__setattr__` would check it again, recursively
            object.__setattr__(self, "feature_columns", [columns] if isinstance(columns, str) else list(columns))
        refuse_first(CROSS_FIELD_CHECKS, self)

    def _check_fields(self) -> None:
        """Raises a `ValueError` naming the first field, in declaration order, that holds a value it does not
        accept."""
        refuse_first(FIELD_CHECKS, self)

    def __setattr__(self, name, value):
        """
        After construction (every field set), a field is set only to a value that construction accepts with the other
        fields as they are: the same checks run, on a copy, and raise before anything changes. Change fields that
        depend on each other (e.g. `shared_variance` and `observation`) together with `dataclasses.replace`.
        """
        declared = self.__dataclass_fields__
        if name in declared and declared.keys() <= self.__dict__.keys():
            value = getattr(dataclasses.replace(self, **{name: value}), name)  # as `__post_init__` normalises it
        super().__setattr__(name, value)

    def resolved(self, has_metadata: bool) -> "KGPSConfig":
        """
        This config with every field it leaves to the dataset (`None`) decided: `WITH_METADATA`'s value when
        `has_metadata` (the train dataset holds metadata columns KGPS shares by, or there is no dataset to look at),
        `NO_METADATA`'s when not. A field set keeps its value; a config with no field left to decide is returned as it
        is. `dataset_columns.with_metadata` calls it where the train dataset is known, `KGPSSelector` where it is not.

        Example:

        ```python
        >>> from trl_kgps import KGPSConfig
        >>> config = KGPSConfig(selection_temperature=1.0)
        >>> config.resolved(has_metadata=False).selection_temperature, config.resolved(False).initial_variance
        (1.0, 4.0)
        ```
        """
        values = WITH_METADATA if has_metadata else NO_METADATA
        unset = {name: value for name, value in values.items() if getattr(self, name) is None}
        return dataclasses.replace(self, **unset) if unset else self

    @classmethod
    def paper(cls, **overrides) -> "KGPSConfig":
        """
        The paper's method, exactly (App. B, Algorithm 1): one uniform warmup epoch, the Kalman update on
        logit(s/k), the posterior-expected p(1-p), the top-B over all prompts and a fixed gamma. `overrides` set any
        other field (e.g. `gamma=0.05`) or undo one of these choices.

        Example:

        ```python
        >>> from trl_kgps import KGPSConfig
        >>> KGPSConfig.paper().selection, KGPSConfig.paper(warmup_epochs=0).warmup_epochs
        ('top', 0)
        ```
        """
        return cls(**{**PAPER, **overrides})

    @classmethod
    def per_prompt(cls, **overrides) -> "KGPSConfig":
        """
        One filter per prompt and nothing shared, gamma fixed, the batch drawn among `16 B` random candidates: the
        default of trl-kgps 0.2, which resumes that version's checkpoints exactly. `overrides` set any other field.

        Example:

        ```python
        >>> from trl_kgps import KGPSConfig
        >>> KGPSConfig.per_prompt().shared_variance, KGPSConfig.per_prompt().candidates
        (0.0, 16.0)
        ```
        """
        return cls(**{**PER_PROMPT, **overrides})
