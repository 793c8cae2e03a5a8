"""The one registry of selectors, by the name a user passes, and how each is built."""

from ..config import KGPSConfig
from ..engine.protocol import PromptSelector
from .arcus import ArcusSelector
from .baselines import GRESOSelector, MoPPSSelector, UniformSelector
from .dps import DPSSelector
from .experimental import ExperimentalConfig, ExperimentalSelector
from .kgps import KGPSSelector


# The one registry of selectors: the name a user passes (`KGPSCallback(selector=...)`, `--selector`) -> the class.
SELECTORS: dict[str, type] = {
    "kgps": KGPSSelector,
    "uniform": UniformSelector,
    "mopps": MoPPSSelector,
    "greso": GRESOSelector,
    "dps": DPSSelector,
    "arcus": ArcusSelector,
}


def build_selector(
    name: str, num_prompts: int, config: KGPSConfig | None = None, seed: int = 0, features=None
) -> PromptSelector:
    """
    The selector `name` (a key of `SELECTORS`) over `num_prompts` prompts; `config` and `features` (see
    `KGPSSelector`) only matter to KGPS, which is an `ExperimentalSelector` for an `ExperimentalConfig`.
    """
    if name not in SELECTORS:
        raise ValueError(f"selector={name!r} is not one of {list(SELECTORS)}; pass one of those names.")
    if SELECTORS[name] is KGPSSelector:
        kgps = ExperimentalSelector if isinstance(config, ExperimentalConfig) else KGPSSelector
        return kgps(num_prompts, config, seed=seed, features=features)
    return SELECTORS[name](num_prompts, seed=seed)


def class_named(class_name: str) -> type:
    """The registered class called `class_name` (as a state file records it); `KeyError` if none is."""
    classes = {cls.__name__: cls for cls in (*SELECTORS.values(), ExperimentalSelector)}
    return classes[class_name]
