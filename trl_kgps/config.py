"""Hyperparameters of Kalman-Guided Prompt Selection."""

import dataclasses
import math
from dataclasses import dataclass, field, fields

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
            if self.feature_columns and self.shared_variance == 0:
                raise ValueError(
                    f"feature_columns={self.feature_columns!r} needs shared_variance > 0 (it is 0): the features only "
                    "act through the shared part. Set shared_variance=1.0, or drop feature_columns."
                )
        if self.prior_column is not None and self.prior_column in (self.feature_columns or ()):
            raise ValueError(
                f"prior_column={self.prior_column!r} is also in feature_columns={self.feature_columns!r}: KGPS reads "
                "it as success rates, binned, and as labels it would count the same values twice. Drop it from "
                "feature_columns."
            )
        if self.prior_column is not None and self.shared_variance == 0:
            raise ValueError(
                f"prior_column={self.prior_column!r} needs shared_variance > 0 (it is 0): the rates start the shared "
                "part of each prompt's belief. Set shared_variance=1.0, or drop prior_column."
            )
        if self.shared_variance != 0 and self.observation == "logit":
            shared = "> 0" if self.shared_variance is not None else "unset (1.0 wherever the dataset has metadata)"
            raise ValueError(
                f"shared_variance {shared} (a factor shared across prompts) works with observation='binomial', got "
                "observation='logit', the paper's update of one prompt at a time. Set shared_variance=0 for it (as "
                "KGPSConfig.paper() does)."
            )

    def _check_fields(self) -> None:
        """Raises a `ValueError` naming the first field, in declaration order, that holds a value it does not accept."""
        if not (is_real(self.gamma) and 0 <= self.gamma <= MAX_LOGIT_VARIANCE):
            raise refusal(
                "gamma",
                self.gamma,
                f"be a finite number >= 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
                "use a non-negative value such as the paper's 0.1",
            )
        # `None`: decided from the dataset (`resolved`)
        if self.process_noise_adaptation is not None and not (
            is_real(self.process_noise_adaptation) and self.process_noise_adaptation >= 0
        ):
            raise refusal(
                "process_noise_adaptation",
                self.process_noise_adaptation,
                "be a finite number >= 0.0",
                "use 0 to keep gamma fixed, or a small step size such as 0.05",
            )
        if self.initial_variance is not None and not (
            is_real(self.initial_variance) and 0 < self.initial_variance <= MAX_LOGIT_VARIANCE
        ):
            raise refusal(
                "initial_variance",
                self.initial_variance,
                f"be a finite number > 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
                "use a positive logit variance such as the paper's 1.0",
            )
        if not (is_integer(self.warmup_epochs) and self.warmup_epochs >= 0):
            raise refusal(
                "warmup_epochs", self.warmup_epochs, "be an integer >= 0", "use 1 (the paper) or 0 (no warmup)"
            )
        for name in ("observation", "selection"):  # a subclass may accept more choices: they are the field's
            value, choices = getattr(self, name), tuple(self.__dataclass_fields__[name].metadata["choices"])
            if value not in choices:
                raise refusal(name, value, f"be one of {choices}", SEE_PRESETS)
        if self.selection_temperature is not None and not (
            is_real(self.selection_temperature) and self.selection_temperature > 0
        ):
            raise refusal(
                "selection_temperature",
                self.selection_temperature,
                "be a finite number > 0.0",
                "use a positive value such as 1",
            )
        if not (is_real(self.candidates) and self.candidates >= 0):
            raise refusal(
                "candidates",
                self.candidates,
                "be a finite number >= 0.0",
                "use a multiple of the batch size such as 16, or 0 to choose among all prompts",
            )
        if 0 < self.candidates < 1:
            raise refusal(
                "candidates",
                self.candidates,
                "be 0 or at least 1 (a multiple of the batch size)",
                "use e.g. 16, or 0 to choose among all prompts",
            )
        if self.feature_columns is not None and not are_names(self.feature_columns, many=True):
            raise refusal(
                "feature_columns",
                self.feature_columns,
                "be distinct column names of the train dataset",
                "use e.g. ['level', 'type'], [] for one factor shared by all prompts, or None to find them",
            )
        if self.prior_column is not None and not are_names(self.prior_column):
            raise refusal(
                "prior_column",
                self.prior_column,
                "be a column name of the train dataset or None",
                "use e.g. 'solve_rate', or None to read none",
            )
        if self.prompt_key is not None and not are_names(self.prompt_key):
            raise refusal(
                "prompt_key",
                self.prompt_key,
                "be a column name of the train dataset or None",
                "use 'prompt' (the default), an id column, or None for one belief per row",
            )
        if self.copies_weight not in ("prompt", "rows"):
            raise refusal(
                "copies_weight",
                self.copies_weight,
                "be one of ('prompt', 'rows')",
                "use 'prompt' (each distinct prompt weighs once) or 'rows' (copies weigh by their rows)",
            )
        if self.copies_weight == "rows" and self.selection != "sample":
            raise refusal(
                "copies_weight",
                self.copies_weight,
                f"go with selection='sample', whose draw it weighs (selection={self.selection!r} draws nothing)",
                "use selection='sample', or copies_weight='prompt'",
            )
        if self.shared_variance is not None and not (
            is_real(self.shared_variance) and 0 <= self.shared_variance <= MAX_LOGIT_VARIANCE
        ):
            raise refusal(
                "shared_variance",
                self.shared_variance,
                f"be a finite number >= 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
                "use a logit variance such as 1, or 0 for one independent filter per prompt (the paper)",
            )
        # compared as Python compares numbers, bools included
        if not (isinstance(self.shared_noise_share, (int, float)) and 0 <= self.shared_noise_share <= 1):
            raise refusal(
                "shared_noise_share",
                self.shared_noise_share,
                "lie in [0, 1]",
                "use e.g. 0.5 (half of the process noise to the shared part)",
            )
        if not (is_real(self.residual_adaptation) and self.residual_adaptation >= 0):
            raise refusal(
                "residual_adaptation",
                self.residual_adaptation,
                "be a finite number >= 0.0",
                "use 0 to keep initial_variance, or a small step size such as 0.05",
            )
        if not (is_integer(self.quadrature_points) and self.quadrature_points >= 2):
            raise refusal(
                "quadrature_points", self.quadrature_points, "be an integer >= 2", "use 5 (the paper) or more nodes"
            )
        if self.quadrature_points > MAX_QUADRATURE_POINTS:
            raise refusal(
                "quadrature_points",
                self.quadrature_points,
                f"be an integer <= {MAX_QUADRATURE_POINTS}",
                "use 5 (the paper) or a few more: numpy's Gauss-Hermite rule is tested up to "
                f"{MAX_QUADRATURE_POINTS} nodes",
            )
        if self.success_reward is not None and not are_names(self.success_reward):
            raise refusal(
                "success_reward",
                self.success_reward,
                "be the name of a reward function or None",
                "use the name the trainer logs it under (e.g. 'accuracy_reward')",
            )
        if not is_real(self.success_threshold):
            raise refusal(
                "success_threshold", self.success_threshold, "be a finite number", "use e.g. 0.5 for 0/1 rewards"
            )
        if not (isinstance(self.delta_norm_sample, (int, float)) and 0 < self.delta_norm_sample <= 1):
            raise refusal(
                "delta_norm_sample",
                self.delta_norm_sample,
                "lie in (0, 1]",
                "use 1 for the exact norm or a fraction such as 0.01 to save memory",
            )

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
