"""
Not a supported API: the KGPS variants measured and left out of `KGPSConfig`, and the paper's ablations, as fields of
`ExperimentalConfig`, a `KGPSConfig` with more fields. The benchmarks' named variants (`demo/variants.py`) and the
paper's ablation table use it; `KGPSSelector` runs either config, and reads each field below at its default for a
plain `KGPSConfig`. Every result for these variants is in benchmarks/RECORD.md: none beat the default.
"""

import dataclasses
from dataclasses import dataclass, field

from ..config import MAX_LOGIT_VARIANCE, SEE_PRESETS, KGPSConfig, is_integer, is_real, refusal


OBJECTIVES = ("mixed", "variance")
UTILITIES = ("posterior", "point")
# `selection` of a plain KGPSConfig, and Thompson sampling.
SELECTIONS = ("sample", "top", "thompson")


@dataclass
class ExperimentalConfig(KGPSConfig):
    r"""
    `KGPSConfig` and, for the benchmarks, the variants measured and left out and the paper's ablations: a prompt scored
    by the chance that its group is mixed (`objective="mixed"`), candidates dealt from passes over the pool
    (`candidate_pass`), gamma calibrated online (`process_noise_adaptation`), the pool's mean surprise added to every
    prompt (`shared_drift`), Thompson sampling (`selection="thompson"`); the ablations \\(Q = \gamma
    \lVert\Delta\theta\rVert^2\\) (`process_noise_power=2`), a fixed \\(Q\\) (`fixed_process_noise`) and the utility at the
    mean (`utility="point"`). `ExperimentalConfig.paper(utility="point")` is the paper's point-estimate ablation.
    """

    selection: str = field(
        default="sample",
        metadata={
            "help": "How a batch is chosen from the scored candidates: 'sample' draws without replacement in "
            "proportion to the scores; 'top' takes the best (the paper); 'thompson' draws one logit per candidate "
            "from its belief and takes the best scores of those draws.",
            "choices": list(SELECTIONS),
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
    group_size: int | None = field(
        default=None,
        metadata={
            "help": "k in the 'mixed' objective. Unset: the rollouts per prompt of the latest observation "
            "(TRL's num_generations), 8 before the first.",
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
            "predicted spread matches the outcomes). 0 keeps gamma fixed (the paper).",
        },
    )
    shared_drift: float = field(
        default=0.0,
        metadata={
            "help": "Share of each batch's mean surprise (posterior minus prior logit mean, averaged over its "
            "prompts) added to every prompt's mean, so that prompts not seen for a while follow the policy's "
            "overall progress. 0 is off (the paper).",
        },
    )
    process_noise_power: float = field(
        default=1.0,
        metadata={
            "help": "Power p of the parameter-update norm in Q = gamma * ||dtheta||^p. 1 is the method section and "
            "Algorithm 1; 2 is the ablation table's gamma * ||dtheta||^2.",
        },
    )
    fixed_process_noise: float | None = field(
        default=None,
        metadata={
            "help": "If set, Q takes this constant value every round, whatever the policy update was: the paper's "
            "'fixed Q' ablation. Leave unset for the update-coupled Q.",
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

    def _check_fields(self) -> None:
        super()._check_fields()
        if self.objective not in OBJECTIVES:
            raise refusal("objective", self.objective, f"be one of {OBJECTIVES}", SEE_PRESETS)
        if self.group_size is not None and not (is_integer(self.group_size) and self.group_size >= 1):
            raise refusal("group_size", self.group_size, "be an integer >= 1", "use TRL's num_generations, or None")
        for name, fix in (
            ("process_noise_adaptation", "use 0 to keep gamma fixed, or a small step size such as 0.05"),
            ("shared_drift", "use 0 (off) or a share such as 0.1"),
        ):
            value = getattr(self, name)
            if not (is_real(value) and value >= 0):
                raise refusal(name, value, "be a finite number >= 0.0", fix)
        if not (is_real(self.process_noise_power) and self.process_noise_power > 0):
            raise refusal(
                "process_noise_power",
                self.process_noise_power,
                "be a finite number > 0.0",
                "use 1 (the paper's method) or 2 (its ablation table)",
            )
        Q = self.fixed_process_noise
        if Q is not None and not (is_real(Q) and 0 <= Q <= MAX_LOGIT_VARIANCE):
            raise refusal(
                "fixed_process_noise",
                Q,
                f"be a finite number >= 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
                "use a non-negative logit variance per round, or None for the update-coupled Q",
            )
        if self.utility not in UTILITIES:
            raise refusal(
                "utility",
                self.utility,
                f"be one of {UTILITIES}",
                "Use 'posterior' (the paper's method) or 'point' (its point-estimate ablation)",
            )

    def __post_init__(self):
        super().__post_init__()
        if self.shared_variance > 0 and self.shared_drift > 0:
            raise ValueError(
                f"shared_variance > 0 (a factor shared across prompts) works with shared_drift=0, got shared_drift="
                f"{self.shared_drift!r}: the shared factor already carries the pool's common drift. Set "
                "shared_variance=0 for it."
            )


# The fields `ExperimentalConfig` adds, with their defaults: what a plain `KGPSConfig` runs with.
EXPERIMENTAL_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(ExperimentalConfig) if f.name not in KGPSConfig.__dataclass_fields__
}


def experimental(config: KGPSConfig) -> ExperimentalConfig:
    """`config` as an `ExperimentalConfig`: itself, or a plain `KGPSConfig` with every added field at its default."""
    if isinstance(config, ExperimentalConfig):
        return config
    return ExperimentalConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})


def config_from_fields(values: dict) -> KGPSConfig:
    """The config of these field values: a plain `KGPSConfig` when every added field is absent or at its default."""
    added = {name: values[name] for name in EXPERIMENTAL_DEFAULTS if name in values}
    selection_added = values.get("selection") not in (
        None,
        *KGPSConfig.__dataclass_fields__["selection"].metadata["choices"],
    )
    if selection_added or any(value != EXPERIMENTAL_DEFAULTS[name] for name, value in added.items()):
        return ExperimentalConfig(**values)
    return KGPSConfig(**{name: value for name, value in values.items() if name not in EXPERIMENTAL_DEFAULTS})
