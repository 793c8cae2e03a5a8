"""Hyperparameters of Kalman-Guided Prompt Selection."""

import math
from dataclasses import dataclass, field


UTILITIES = ("posterior", "point")
OBSERVATIONS = ("binomial", "logit")
OBJECTIVES = ("mixed", "variance")
SELECTIONS = ("sample", "top", "thompson")

# What `KGPSConfig.paper()` sets: the paper's method, exactly as published (App. B and Algorithm 1).
PAPER = {
    "initial_variance": 1.0,
    "warmup_epochs": 1,
    "observation": "logit",
    "objective": "variance",
    "selection": "top",
    "selection_temperature": 1.0,
    "candidates": 0.0,
    "candidate_pass": False,
    "process_noise_adaptation": 0.0,
    "shared_drift": 0.0,
    "delta_norm_sample": 1.0,
    "feature_columns": None,
    "shared_variance": 0.0,
}
# One filter per prompt, the batch drawn among 16 B random candidates: the default of trl-kgps 0.2.
PER_PROMPT = {"shared_variance": 0.0, "candidates": 16.0, "initial_variance": 4.0, "selection_temperature": 0.5}


@dataclass
class KGPSConfig:
    r"""
    Configuration of [`KGPSSelector`]: the measured default, the paper's method and their ablations.

    `KGPSConfig()` is the default: the paper's filter and utility (`gamma=0.1`, a five-point Gauss–Hermite
    posterior-expected `p(1-p)`) with four modelling departures, each measured (docs/algorithm.md): no warmup epoch,
    the exact binomial update, a factor shared across prompts (by the dataset's `feature_columns`, e.g. `["level"]`,
    or one factor for the whole pool; its residual prior learnt online), and a batch drawn over the whole pool in
    proportion to the utility instead of the top-B; and the update norm measured on a 1 % sample of the parameters
    (`delta_norm_sample=0.01`; the paper's, exact, is 1). `KGPSConfig.paper()` is the paper's method exactly (App. B:
    `initial_variance=1.0`, one warmup epoch, the top-B over all prompts). Every field name is distinct from
    `trl.GRPOConfig`'s, so both parse together: `TrlParser((GRPOConfig, KGPSConfig))`.

    Symbols, as in the paper:

    - process noise, added to every prompt's logit variance after each selection round:
      \\(Q_t = \gamma \sum_{\text{steps}} \lVert \theta_s - \theta_{s-1} \rVert_2^{p}\\), with \\(p\\) =
      `process_noise_power`, or \\(Q_t\\) = `fixed_process_noise` when that is set;
    - prior of a prompt before its first observation, and after its warmup observation: variance
      \\(P_0\\) = `initial_variance`;
    - utility of a prompt: \\(\mathbb{E}_{\psi \sim \mathcal{N}(m, P)}[\sigma(\psi)(1 - \sigma(\psi))]\\) by
      `quadrature_points`-point Gauss–Hermite (`utility="posterior"`), or \\(\sigma(m)(1 - \sigma(m))\\)
      (`utility="point"`).
    """

    gamma: float = field(
        default=0.1,
        metadata={
            "help": "Process-noise scale gamma: Q = gamma * ||theta_t - theta_{t-1}||_2 ** process_noise_power is "
            "added to every prompt's logit variance after each policy update (paper App. B: 0.1)."
        },
    )
    initial_variance: float = field(
        default=1.0,
        metadata={
            "help": "With shared_variance > 0 (the default): the prior variance of a prompt's own logit residual, "
            "around what its features predict, where residual_adaptation starts from. With shared_variance 0 (the "
            "paper): the logit variance P0 of every prompt before its first observation, set again when its warmup "
            "observation arrives (paper App. B: 1.0)."
        },
    )
    warmup_epochs: int = field(
        default=0,
        metadata={
            "help": "Epochs of uniform prompt sampling that initialise each prompt's logit mean before KGPS starts "
            "selecting (prompt-selection warmup, unrelated to learning-rate warmup). The paper uses 1; 0 (the "
            "default) selects from the first batch, every prompt starting from the shared prior (mean 0, variance "
            "shared_variance + initial_variance), which then follows what its group has shown."
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
    objective: str = field(
        default="variance",
        metadata={
            "help": "What a prompt's score is the posterior expectation of: 'variance' is the paper's p(1 - p); "
            "'mixed' is the probability 1 - p^k - (1-p)^k that a group of k rollouts is mixed (GRPO learns only "
            "from those).",
            "choices": list(OBJECTIVES),
        },
    )
    selection: str = field(
        default="sample",
        metadata={
            "help": "How a batch is chosen from the scored candidates: 'sample' draws without replacement in "
            "proportion to the scores; 'top' takes the best (the paper); 'thompson' draws one logit per candidate "
            "from its belief and takes the best scores of those draws.",
            "choices": list(SELECTIONS),
        },
    )
    selection_temperature: float = field(
        default=1.0,
        metadata={
            "help": "selection='sample' draws each prompt with probability proportional to score ** (1 / "
            "selection_temperature): 1 is proportional to the score, below 1 sharper (towards 'top'), above 1 flatter."
        },
    )
    candidates: float = field(
        default=0.0,
        metadata={
            "help": "Candidates per batch, as a multiple of the batch size B: each batch is chosen among "
            "ceil(candidates * B) prompts drawn at random (see candidate_pass), so that a round costs "
            "O(candidates * B) whatever the dataset's size. 0 (the default) chooses among all prompts every round, "
            "as the paper does; with selection='sample' that draw is exact and still costs O(B) on average."
        },
    )
    candidate_pass: bool = field(
        default=False,
        metadata={
            "help": "Deal the candidates from seeded passes over the dataset, so that every prompt is a candidate "
            "once a pass (coverage), instead of drawing them at random each round."
        },
    )
    process_noise_adaptation: float = field(
        default=0.0,
        metadata={
            "help": "Step size of the online calibration of gamma: after each batch, gamma is multiplied by "
            "exp(rate * (NIS - 1)), NIS being the batch's normalized innovation squared (1 when the filter's "
            "predicted spread matches the outcomes). 0 keeps gamma fixed (the paper)."
        },
    )
    shared_drift: float = field(
        default=0.0,
        metadata={
            "help": "Share of each batch's mean surprise (posterior minus prior logit mean, averaged over its "
            "prompts) added to every prompt's mean, so that prompts not seen for a while follow the policy's "
            "overall progress. 0 is off (the paper)."
        },
    )
    feature_columns: list[str] | None = field(
        default=None,
        metadata={
            "help": "Train-dataset columns whose values prompts share, from which KGPS learns across prompts: "
            "categorical columns (e.g. MATH's 'level' and 'type', a mixture's 'source') or one embedding column (a "
            "float vector per prompt). Categorical columns may hold at most 1,024 distinct values in all. Unset: one "
            "factor shared by all prompts. Needs shared_variance > 0.",
            "nargs": "+",
        },
    )
    shared_variance: float = field(
        default=1.0,
        metadata={
            "help": "Prior logit variance of the shared part of every prompt's success rate (the part its features "
            "predict); initial_variance is then the prior variance of the prompt's own residual. 0 turns sharing off: "
            "one independent filter per prompt (the paper)."
        },
    )
    shared_noise_share: float = field(
        default=0.5,
        metadata={
            "help": "Share of each round's process noise Q = gamma * ||dtheta|| that goes to the shared part (the "
            "rest to every prompt's residual), so that each prompt's logit variance still grows by Q."
        },
    )
    residual_adaptation: float = field(
        default=0.05,
        metadata={
            "help": "With shared_variance > 0: step size of the online estimate of the residual prior variance (how "
            "far prompts spread around what their features predict), which starts at initial_variance. After each "
            "batch, it is multiplied by exp(rate * (NIS - 1)) over the batch's first observations, so a prior that "
            "proves too confident widens for every prompt not yet seen. 0 keeps initial_variance."
        },
    )
    group_size: int | None = field(
        default=None,
        metadata={
            "help": "k in the 'mixed' objective. Unset: the rollouts per prompt of the latest observation "
            "(TRL's num_generations), 8 before the first."
        },
    )
    process_noise_power: float = field(
        default=1.0,
        metadata={
            "help": "Power p of the parameter-update norm in Q = gamma * ||dtheta||^p. 1 is the method section and "
            "Algorithm 1; 2 is the ablation table's gamma * ||dtheta||^2."
        },
    )
    fixed_process_noise: float | None = field(
        default=None,
        metadata={
            "help": "If set, Q takes this constant value every round, whatever the policy update was: the paper's "
            "'fixed Q' ablation. Leave unset for the update-coupled Q."
        },
    )
    utility: str = field(
        default="posterior",
        metadata={
            "help": "How a prompt is scored: 'posterior' is the posterior expectation of p(1-p) (the paper's "
            "method); 'point' scores the posterior mean only, p(1-p) at p = sigmoid(m) (the paper's 'point "
            "estimate' ablation).",
            "choices": list(UTILITIES),
        },
    )
    quadrature_points: int = field(
        default=5,
        metadata={
            "help": "Number of Gauss-Hermite nodes for the posterior utility (paper: 5). Ignored when utility='point'."
        },
    )

    success_reward: str | None = field(
        default=None,
        metadata={
            "help": "Name of the reward function whose value decides whether a completion succeeded (e.g. "
            "'accuracy_reward'). Unset: the trainer's weighted sum of all reward functions."
        },
    )
    success_threshold: float = field(
        default=0.5,
        metadata={
            "help": "A completion succeeds when its reward (see success_reward) is >= this. 0.5 splits 0/1 rewards, "
            "also with small bonuses or penalties added."
        },
    )
    delta_norm_sample: float = field(
        default=0.01,
        metadata={
            "help": "Fraction of parameter coordinates kept to measure ||theta_t - theta_{t-1}||. 0.01 keeps one in a "
            "hundred of the trainable parameters (this rank's shard) and estimates the norm (its measured error: "
            "docs/trl.md); 1 is exact and keeps a full copy of them (the paper's preset)."
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
        _check_real("gamma", self.gamma, minimum=0.0, fix="use a non-negative value such as the paper's 0.1")
        _check_real(
            "initial_variance",
            self.initial_variance,
            minimum=0.0,
            strict=True,
            fix="use a positive logit variance such as the paper's 1.0",
        )
        _check_int("warmup_epochs", self.warmup_epochs, minimum=0, fix="use 1 (the paper) or 0 (no warmup)")
        _check_real(
            "process_noise_power",
            self.process_noise_power,
            minimum=0.0,
            strict=True,
            fix="use 1 (the paper's method) or 2 (its ablation table)",
        )
        if self.fixed_process_noise is not None:
            _check_real(
                "fixed_process_noise",
                self.fixed_process_noise,
                minimum=0.0,
                fix="use a non-negative logit variance per round, or None for the update-coupled Q",
            )
        if self.utility not in UTILITIES:
            raise ValueError(
                f"utility must be one of {UTILITIES}, got {self.utility!r}. Use 'posterior' (the paper's method) or "
                "'point' (its point-estimate ablation)."
            )
        if self.success_reward is not None and (not isinstance(self.success_reward, str) or not self.success_reward):
            raise ValueError(
                f"success_reward must be the name of a reward function or None, got {self.success_reward!r}: use "
                "the name the trainer logs it under (e.g. 'accuracy_reward')."
            )
        _check_real("success_threshold", self.success_threshold, minimum=-math.inf, fix="use e.g. 0.5 for 0/1 rewards")
        if not (isinstance(self.delta_norm_sample, (int, float)) and 0 < self.delta_norm_sample <= 1):
            raise ValueError(
                f"delta_norm_sample must lie in (0, 1], got {self.delta_norm_sample!r}: use 1 for the exact norm or "
                "a fraction such as 0.01 to save memory."
            )
        for name, choices in (
            ("observation", OBSERVATIONS),
            ("objective", OBJECTIVES),
            ("selection", SELECTIONS),
        ):
            if getattr(self, name) not in choices:
                raise ValueError(
                    f"{name} must be one of {choices}, got {getattr(self, name)!r}: use one of those (KGPSConfig() "
                    "holds the measured default, KGPSConfig.paper() the paper's choices)."
                )
        _check_real(
            "selection_temperature",
            self.selection_temperature,
            minimum=0.0,
            strict=True,
            fix="use a positive value such as 1",
        )
        _check_real(
            "candidates",
            self.candidates,
            minimum=0.0,
            fix="use a multiple of the batch size such as 16, or 0 to choose among all prompts",
        )
        if 0 < self.candidates < 1:
            raise ValueError(
                f"candidates must be 0 or at least 1 (a multiple of the batch size), got {self.candidates!r}: "
                "use e.g. 16, or 0 to choose among all prompts."
            )
        _check_real(
            "process_noise_adaptation",
            self.process_noise_adaptation,
            minimum=0.0,
            fix="use 0 to keep gamma fixed, or a small step size such as 0.05",
        )
        _check_real("shared_drift", self.shared_drift, minimum=0.0, fix="use 0 (off) or a share such as 0.1")
        if self.feature_columns is not None:
            columns = [self.feature_columns] if isinstance(self.feature_columns, str) else self.feature_columns
            if not (
                isinstance(columns, (list, tuple))
                and columns
                and all(isinstance(column, str) and column for column in columns)
                and len(set(columns)) == len(columns)
            ):
                raise ValueError(
                    f"feature_columns must be distinct column names of the train dataset, got "
                    f"{self.feature_columns!r}: use e.g. ['level', 'type'], or None for one factor shared by all prompts."
                )
            self.feature_columns = list(columns)
        _check_real(
            "shared_variance",
            self.shared_variance,
            minimum=0.0,
            fix="use a logit variance such as 1, or 0 for one independent filter per prompt (the paper)",
        )
        if self.feature_columns is not None and self.shared_variance == 0:
            raise ValueError(
                f"feature_columns={self.feature_columns!r} needs shared_variance > 0 (it is 0): the features only "
                "act through the shared part. Set shared_variance=1.0, or drop feature_columns."
            )
        if not (isinstance(self.shared_noise_share, (int, float)) and 0 <= self.shared_noise_share <= 1):
            raise ValueError(
                f"shared_noise_share must lie in [0, 1], got {self.shared_noise_share!r}: use e.g. 0.5 (half of the "
                "process noise to the shared part)."
            )
        if self.shared_variance > 0 and (self.shared_drift > 0 or self.observation == "logit"):
            raise ValueError(
                "shared_variance > 0 (a factor shared across prompts) works with observation='binomial' and "
                f"shared_drift=0, got observation={self.observation!r}, shared_drift={self.shared_drift!r}: the "
                "shared factor already carries the pool's common drift. Set shared_variance=0 for those."
            )
        _check_real(
            "residual_adaptation",
            self.residual_adaptation,
            minimum=0.0,
            fix="use 0 to keep initial_variance, or a small step size such as 0.05",
        )
        if self.group_size is not None:
            _check_int("group_size", self.group_size, minimum=1, fix="use TRL's num_generations, or None")
        _check_int(
            "quadrature_points",
            self.quadrature_points,
            minimum=2,
            fix="use 5 (the paper) or more nodes; for a single evaluation at the mean set utility='point'",
        )

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
        One filter per prompt and nothing shared, the batch drawn among `16 B` random candidates: the default of
        trl-kgps 0.2, which resumes that version's checkpoints exactly. `overrides` set any other field.

        Example:

        ```python
        >>> from trl_kgps import KGPSConfig
        >>> KGPSConfig.per_prompt().shared_variance, KGPSConfig.per_prompt().candidates
        (0.0, 16.0)
        ```
        """
        return cls(**{**PER_PROMPT, **overrides})


def _check_real(name: str, value, *, minimum: float, fix: str, strict: bool = False) -> None:
    is_real = isinstance(value, (int, float)) and not isinstance(value, bool)
    too_small = is_real and (value <= minimum if strict else value < minimum)
    if not is_real or not math.isfinite(value) or too_small:
        bound = "" if minimum == -math.inf else f" > {minimum}" if strict else f" >= {minimum}"
        raise ValueError(f"{name} must be a finite number{bound}, got {value!r}: {fix}.")


def _check_int(name: str, value, *, minimum: int, fix: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}: {fix}.")
