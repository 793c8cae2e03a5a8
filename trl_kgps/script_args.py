"""Script arguments of the example training scripts: TRL's, plus the prompt selector."""

from dataclasses import dataclass, field

from trl import ScriptArguments

from .selectors import SELECTORS


@dataclass
class SelectorArguments:
    """
    The prompt selector of a training script.

    Args:
        selector (`str`, *optional*, defaults to `"kgps"`):
            Which prompts each generation batch trains on: `"kgps"` (Kalman-Guided Prompt Selection), or one of the
            paper's baselines, run through the same sampler, metrics and checkpoints: `"uniform"` (TRL's order),
            `"mopps"` (Beta posteriors, Thompson sampling), `"greso"` (skips prompts whose recent groups were all
            right or all wrong) or `"dps"` (a hidden Markov model of each prompt's solving state).
    """

    selector: str = field(
        default="kgps",
        metadata={
            "help": "Which prompts each generation batch trains on: 'kgps' (Kalman-Guided Prompt Selection), or one "
            "of the paper's baselines through the same sampler, metrics and checkpoints: 'uniform' (TRL's order), "
            "'mopps' (Beta posteriors, Thompson sampling), 'greso' (skips prompts whose recent groups were all "
            "right or all wrong) or 'dps' (a hidden Markov model of each prompt's solving state).",
            "choices": list(SELECTORS),
        },
    )

    def __post_init__(self):
        if self.selector not in SELECTORS:
            raise ValueError(f"selector={self.selector!r} is not a prompt selector; choose one of {list(SELECTORS)}.")


@dataclass
class KGPSScriptArguments(SelectorArguments, ScriptArguments):
    """
    [`trl.ScriptArguments`] plus the prompt selector (`selector`, see [`SelectorArguments`]). Parse it next to the
    trainer's and KGPS's configurations: `TrlParser((KGPSScriptArguments, GRPOConfig, KGPSConfig, ModelConfig))`.
    """
