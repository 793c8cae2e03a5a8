"""
Named KGPS configurations that the simulator and the benchmarks compare: the default, the paper's method, the
paper's own ablations, each of the default's departures from the paper added to the paper alone or taken away from
the default, and the candidates that were measured and left out of the default.
"""

from .config import PAPER, KGPSConfig


# Each departure of the default from the paper, as the KGPSConfig fields it sets (the paper's values are in PAPER).
DEPARTURES = {
    "no_warmup": ("warmup_epochs",),
    "binomial": ("observation",),
    "wide_prior": ("initial_variance",),
    "sample": ("selection", "selection_temperature"),
    "candidates": ("candidates",),
}
# Candidates measured and not in the default, as the fields they set on top of the default.
ALTERNATIVES = {
    "mixed": {"objective": "mixed"},
    "thompson": {"selection": "thompson"},
    "proportional": {"selection_temperature": 1.0},
    "candidate_pass": {"candidate_pass": True},
    "adaptive_q": {"process_noise_adaptation": 0.05},
    "shared_drift": {"shared_drift": 0.1},
}


def _default_values(fields: tuple[str, ...]) -> dict:
    default = KGPSConfig()
    return {name: getattr(default, name) for name in fields}


VARIANTS: dict[str, KGPSConfig] = {
    "kgps": KGPSConfig(),
    "kgps_paper": KGPSConfig.paper(),
    # The paper's ablations: the utility at the mean only, and a constant process noise (its usual size here).
    "kgps_point": KGPSConfig.paper(utility="point"),
    "kgps_fixed_q": KGPSConfig.paper(fixed_process_noise=0.005),
    **{f"paper+{name}": KGPSConfig.paper(**_default_values(fields)) for name, fields in DEPARTURES.items()},
    **{
        f"paper+{name}": KGPSConfig.paper(**fields)
        for name, fields in ALTERNATIVES.items()
        if name not in ("proportional", "candidate_pass")  # settings of the default's draw, meaningless without it
    },
    **{f"kgps-{name}": KGPSConfig(**{f: PAPER[f] for f in fields}) for name, fields in DEPARTURES.items()},
    **{f"kgps+{name}": KGPSConfig(**fields) for name, fields in ALTERNATIVES.items()},
}
