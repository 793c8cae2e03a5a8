"""
The one registry of selectors, by the name a user passes, and how each is built. The library registers its own; a
user's selector, and the benchmarks' experimental ones, register themselves with `register_selector`.
"""

from collections.abc import Sequence

from ..config import KGPSConfig
from ..engine.protocol import PromptSelector
from .arcus import ArcusSelector
from .baselines import GRESOSelector, MoPPSSelector, UniformSelector
from .dps import DPSSelector
from .kgps import KGPSSelector
from .practice import GaussianCurriculumSelector, InSightSelector, OfflineFilterSelector
from .prior_rates import Rates


# The one registry of selectors: the name a user passes (`KGPSCallback(selector=...)`, `--selector`) -> the class.
SELECTORS: dict[str, type] = {
    "kgps": KGPSSelector,
    "uniform": UniformSelector,
    "mopps": MoPPSSelector,
    "greso": GRESOSelector,
    "dps": DPSSelector,
    "arcus": ArcusSelector,
    "gaussian": GaussianCurriculumSelector,
    "insight": InSightSelector,
    "offline_filter": OfflineFilterSelector,
}
# The selectors trl-kgps ships and supports, by name: what every command line offers, whatever it imported.
BUILT_IN = tuple(SELECTORS)
# Selectors shipped in trl-kgps that the library never imports (not a supported API): each registers itself when its
# module is imported, which a state that names one needs first. No command line offers them.
REGISTERED_ON_IMPORT = {"ExperimentalSelector": "trl_kgps.selectors.experimental"}


def build_selector(
    name: str,
    num_prompts: int,
    config: KGPSConfig | None = None,
    seed: int = 0,
    features=None,
    rows_per_prompt=None,
) -> PromptSelector:
    """
    The selector `name` (a key of `SELECTORS`) over `num_prompts` prompts; `config`, `features` and `rows_per_prompt`
    (see `KGPSSelector`) matter to KGPS (and its registered variants: for a config of a variant's `config_class`,
    that variant), and to `offline_filter`, which reads its profiled pass rates from `features[config.prior_column]`
    (an `(N,)` array or `Rates`, as `dataset_columns.read_features` returns them).
    """
    if name not in SELECTORS:
        raise ValueError(f"selector={name!r} is not one of {list(SELECTORS)}; pass one of those names.")
    if issubclass(SELECTORS[name], KGPSSelector):
        kgps = _reader(SELECTORS[name], config)
        return kgps(num_prompts, config, seed=seed, features=features, rows_per_prompt=rows_per_prompt)
    if SELECTORS[name] is OfflineFilterSelector:
        return OfflineFilterSelector(num_prompts, _profiled_rates(config, features), seed=seed)
    return SELECTORS[name](num_prompts, seed=seed)


def _reader(cls: type[KGPSSelector], config: KGPSConfig | None) -> type[KGPSSelector]:
    """
    `cls`, or the registered variant of it that reads `config`'s class (its `config_class`): `selector="kgps"` with an
    `ExperimentalConfig` builds the `ExperimentalSelector` its module registered. Without one, `cls` says what it does
    not read.
    """
    if config is None or type(config) is cls.config_class:
        return cls
    variants = [c for c in SELECTORS.values() if issubclass(c, cls) and c.config_class is type(config)]
    return variants[0] if variants else cls


def _profiled_rates(config: KGPSConfig | None, features) -> object:
    """`offline_filter`'s pass rates: the values of the column `config.prior_column` in `features`."""
    column = getattr(config, "prior_column", None)
    if column is None:
        raise ValueError(
            "selector='offline_filter' trains on the prompts the starting model sometimes solves: it reads each "
            "prompt's profiled pass rate (e.g. 3/8 of 8 samples) from the dataset column KGPSConfig(prior_column=...) "
            "names, which is unset. Set prior_column to that column, or pass "
            "selector=OfflineFilterSelector(len(train_dataset), pass_rates)."
        )
    values = None if features is None else features.get(column)
    if values is None:
        raise ValueError(
            f"selector='offline_filter' found no values of its pass-rate column prior_column={column!r}: pass them "
            f"to build_selector as features={{{column!r}: rates}}, or pass "
            "selector=OfflineFilterSelector(len(train_dataset), pass_rates)."
        )
    return values.values if isinstance(values, Rates) else values


def register_selector(name: str, cls: type) -> None:
    """
    Makes `cls` a selector users pick by `name`, as they pick the built-in ones: `KGPSCallback(selector=name)` builds
    `cls(num_prompts, seed=args.seed)` over the train dataset's distinct prompts (a `KGPSSelector` subclass also gets
    the callback's config, and is built for a config of its `config_class` where KGPS is asked for), and a checkpoint
    holding its state resumes it. `cls` implements `PromptSelector` (`select`, `initialize`, `update`, `predict`,
    `predicted_success`, `state_dict`, `load_state_dict`).

    Raises:
        `ValueError`: a `name` that is not a non-empty string or names another class already, checked before the
            registry changes.
        `TypeError`: a `cls` that is not a class implementing `PromptSelector`.

    Example:

    ```python
    >>> from trl_kgps import register_selector
    >>> from trl_kgps.selectors import UniformSelector
    >>> class Mine(UniformSelector): ...
    >>> register_selector("mine", Mine)  # then KGPSCallback(selector="mine")
    ```
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_selector: name must be a non-empty string, got {name!r}.")
    missing = [m for m in _PROTOCOL if not callable(getattr(cls, m, None))] if isinstance(cls, type) else _PROTOCOL
    if missing:
        raise TypeError(
            f"register_selector({name!r}, {cls!r}): a selector is a class with the PromptSelector methods, and this "
            f"one lacks {list(missing)}: implement them (trl_kgps.PromptSelector documents each)."
        )
    if SELECTORS.get(name, cls) is not cls:
        raise ValueError(
            f"register_selector: {name!r} names {SELECTORS[name].__name__} already: pick another name for "
            f"{cls.__name__}."
        )
    SELECTORS[name] = cls


# What `register_selector` checks a class has: the `PromptSelector` protocol's methods.
_PROTOCOL = (
    "select", "initialize", "update", "predict", "predicted_success", "state_dict", "load_state_dict",
)  # fmt: skip


class SelectorChoices(Sequence):
    """
    The names a command line's `--selector` takes (`script_args.SelectorArguments`), read each time one is parsed: the
    built-in selectors (`BUILT_IN`) and those the user's script registered (`register_selector`) before parsing, never
    one that a module trl-kgps ships unsupported registers when imported (`REGISTERED_ON_IMPORT`): a command offers the
    same choices whatever it imported.
    """

    def _names(self) -> list[str]:
        return [name for name, cls in SELECTORS.items() if REGISTERED_ON_IMPORT.get(cls.__name__) != cls.__module__]

    def __getitem__(self, index):
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


def class_named(class_name: str) -> type:
    """The registered class called `class_name` (as a state file records it); `KeyError` if none is."""
    classes = {cls.__name__: cls for cls in SELECTORS.values()}
    return classes[class_name]


def unregistered_module(class_name: str) -> str | None:
    """
    The module to import for the selector class `class_name`, one that trl-kgps ships unregistered
    (`REGISTERED_ON_IMPORT`), while it is not registered; `None` otherwise.
    """
    module = REGISTERED_ON_IMPORT.get(class_name)
    return None if module is None or any(cls.__name__ == class_name for cls in SELECTORS.values()) else module
