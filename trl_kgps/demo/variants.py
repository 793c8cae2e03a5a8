"""
Named KGPS configurations that the simulator and the benchmarks compare: the default, the per-prompt default it
replaced, the paper's method, the paper's own ablations, each of the per-prompt default's departures from the paper
added to the paper alone or taken away from that default, and the candidates that were measured and left out.
"""

import dataclasses

from ..config import PAPER, KGPSConfig
from ..selectors.experimental import EXPERIMENTAL_DEFAULTS, ExperimentalConfig


# Each departure of the per-prompt default from the paper, as the KGPSConfig fields it sets (the paper's values are
# in PAPER).
DEPARTURES = {
    "no_warmup": ("warmup_epochs",),
    "binomial": ("observation",),
    "wide_prior": ("initial_variance",),
    "sample": ("selection", "selection_temperature"),
    "candidates": ("candidates",),
}
# Candidates measured and not in the per-prompt default, as the fields they set on top of it.
ALTERNATIVES = {
    "mixed": {"objective": "mixed"},
    "thompson": {"selection": "thompson"},
    "proportional": {"selection_temperature": 1.0},
    "candidate_pass": {"candidate_pass": True},
    "adaptive_q": {"process_noise_adaptation": 0.05},
    "shared_drift": {"shared_drift": 0.1},
}
# Settings of the shared filter measured against the default, as the fields they set on top of it. The default
# calibrates gamma, so each of them does too unless it sets `process_noise_adaptation`.
SHARED_ALTERNATIVES = {
    "narrow_residual": {"initial_variance": 1.0},
    "wide_residual": {"initial_variance": 4.0},
    "wide_shared": {"shared_variance": 4.0},
    "wider_shared": {"shared_variance": 16.0},
    "shared_2": {"shared_variance": 2.0},
    "mixed": {"objective": "mixed"},
    "proportional": {"selection_temperature": 1.0},
    "sharp": {"selection_temperature": 0.5},
    "sharp_wide_residual": {"selection_temperature": 0.5, "initial_variance": 4.0},
    "candidates": {"candidates": 16.0},
    "noise_shared_0.2": {"shared_noise_share": 0.2},
    "noise_shared_0.8": {"shared_noise_share": 0.8},
    "fixed_gamma": {"process_noise_adaptation": 0.0},  # gamma fixed, the default before it learnt gamma
    "fixed_residual": {"residual_adaptation": 0.0},
    "fast_residual": {"residual_adaptation": 0.2},
    "gamma_0.03": {"gamma": 0.03},
    "gamma_0.3": {"gamma": 0.3},
    "gamma_1": {"gamma": 1.0},
    "gamma_3": {"gamma": 3.0},
    "flat": {"selection_temperature": 2.0},
    "fast_adaptive_q": {"process_noise_adaptation": 0.2},
    "capped_residual": {"residual_cap": True},
    "group_residual": {"residual_prior_by_group": True},
    "group_residual_capped": {"residual_prior_by_group": True, "residual_cap": True},
    "retire_2": {"retire_after": 2},
    "dealt": {"dealt": True},
    "dealt_sharp": {"dealt": True, "selection_temperature": 0.5},
    "pass_4": {"candidates": 4.0, "candidate_pass": True},
    "pass_4_sharp": {"candidates": 4.0, "candidate_pass": True, "selection_temperature": 0.5},
    "cooldown": {"cooldown": 0.25},
    "cooldown_sharp": {"cooldown": 0.25, "selection_temperature": 0.5},
}


def _config(preset: str, **fields) -> KGPSConfig:
    """`KGPSConfig`'s `preset` ("default", "paper", "per_prompt") with `fields` set: an `ExperimentalConfig` when one
    of them is a variant left out or an ablation (or Thompson sampling)."""
    experimental = fields.keys() & EXPERIMENTAL_DEFAULTS or fields.get("selection") == "thompson"
    cls = ExperimentalConfig if experimental else KGPSConfig
    return cls(**fields) if preset == "default" else getattr(cls, preset)(**fields)


def _per_prompt_values(fields: tuple[str, ...]) -> dict:
    per_prompt = KGPSConfig.per_prompt()
    return {name: getattr(per_prompt, name) for name in fields}


VARIANTS: dict[str, KGPSConfig] = {
    "kgps": KGPSConfig(),
    "kgps_per_prompt": KGPSConfig.per_prompt(),
    "kgps_paper": KGPSConfig.paper(),
    # The paper's ablations: the utility at the mean only, and a constant process noise (its usual size here).
    "kgps_point": _config("paper", utility="point"),
    "kgps_fixed_q": _config("paper", fixed_process_noise=0.005),
    **{f"paper+{name}": KGPSConfig.paper(**_per_prompt_values(fields)) for name, fields in DEPARTURES.items()},
    **{
        f"paper+{name}": _config("paper", **fields)
        for name, fields in ALTERNATIVES.items()
        if name not in ("proportional", "candidate_pass")  # settings of the default's draw, meaningless without it
    },
    **{
        f"per_prompt-{name}": KGPSConfig.per_prompt(**{f: PAPER[f] for f in fields})
        for name, fields in DEPARTURES.items()
    },
    **{f"per_prompt+{name}": _config("per_prompt", **fields) for name, fields in ALTERNATIVES.items()},
    **{f"kgps+{name}": _config("default", **fields) for name, fields in SHARED_ALTERNATIVES.items()},
}


def variant_config(method: str) -> KGPSConfig | None:
    """
    The `KGPSConfig` a method name of the simulator and the benchmarks stands for: a `VARIANTS` name, alone (reading no
    column: `feature_columns=[]`) or followed by `:<column>` to read that dataset column as its feature (`kgps:level`
    is `KGPSConfig(feature_columns=["level"])`); `None` for any other name.
    """
    name, separator, column = method.partition(":")
    if name not in VARIANTS or (separator and not column):
        return None
    return dataclasses.replace(VARIANTS[name], feature_columns=[column] if column else [])
