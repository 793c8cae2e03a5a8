"""Script arguments of the example training scripts: TRL's, plus the prompt selector."""

from dataclasses import dataclass, field

from trl import ScriptArguments

from .selectors.registry import SelectorChoices


# What `--selector` takes, read when the command line is parsed.
SELECTOR_CHOICES = SelectorChoices()


@dataclass
class SelectorArguments:
    """
    The prompt selector of a training script.

    Args:
        selector (`str`, *optional*, defaults to `"kgps"`):
            Which prompts each generation batch trains on: `"kgps"` (Kalman-Guided Prompt Selection), or one of the
            paper's baselines, run through the same sampler, metrics and checkpoints: `"uniform"` (TRL's order),
            `"mopps"` (Beta posteriors, Thompson sampling), `"greso"` (skips prompts whose recent groups were all
            right or all wrong) or `"dps"` (a hidden Markov model of each prompt's solving state); the others
            trl-kgps ships (`selectors.registry.BUILT_IN`), or a selector the script registered with
            `trl_kgps.register_selector` before parsing. The choices are the same whatever else was imported.
    """

    selector: str = field(
        default="kgps",
        metadata={
            "help": "Which prompts each generation batch trains on: 'kgps' (Kalman-Guided Prompt Selection), or one "
            "of the paper's baselines through the same sampler, metrics and checkpoints: 'uniform' (TRL's order), "
            "'mopps' (Beta posteriors, Thompson sampling), 'greso' (skips prompts whose recent groups were all "
            "right or all wrong) or 'dps' (a hidden Markov model of each prompt's solving state); the others "
            "trl-kgps ships, or one the script registered with trl_kgps.register_selector before parsing.",
            "choices": SELECTOR_CHOICES,
        },
    )

    def __post_init__(self):
        if self.selector not in SELECTOR_CHOICES:
            raise ValueError(
                f"selector={self.selector!r} is not a prompt selector; choose one of {list(SELECTOR_CHOICES)}, or "
                "register yours with trl_kgps.register_selector first."
            )


@dataclass
class KGPSScriptArguments(SelectorArguments, ScriptArguments):
    """
    [`trl.ScriptArguments`] plus the prompt selector (`selector`, see [`SelectorArguments`]). Parse it next to the
    trainer's and KGPS's configurations: `TrlParser((KGPSScriptArguments, GRPOConfig, KGPSConfig, ModelConfig))`.
    """
