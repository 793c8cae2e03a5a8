"""
States written by earlier trl-kgps releases, and how each reads today. Whatever a loader fills in or infers for a state
that predates a field is here and nowhere else. trl-kgps 1.0 drops all of it (`DROPPED_IN`): a state of a 0.x release
then loads with the release that wrote it, or its checkpoint resumes with KGPS started afresh
(`KGPSConfig(restart_on_missing_state=True)`).

What each release wrote, and what it lacks:

- 0.1: `KGPSSelector` state version 1, the paper's selector only: no calibration of gamma, drift, candidate pass or
  group size; no digest of the prompts, no trainer record, and no lags, selection times or recent batches in the
  ledger.
- 0.2: version 2, one filter per prompt by default (no shared factor); its config holds the variants that are
  `ExperimentalConfig`'s fields today, and its state the candidate pass and the group size last seen that only
  `ExperimentalSelector` reads; otherwise as 0.1.
- 0.1 and 0.2's baselines, saved before their authors' recipes: MoPPS without `pool` or its epoch walk, GRESO without
  `adapt_after_epochs`, `epoch` and `rules` (it continues with the walk it was saved under,
  `GRESOSelector._select_before_rules`).
- 0.3: version 3, read as written; the digest of its rows and the trainer's record, with its loop, and the release
  that wrote it (`RELEASE`), in the file's `meta` and in a `KGPSSelector`'s state.

0.2's variants of KGPS are `ExperimentalSelector`'s today: a `KGPSSelector` state of 0.1 or 0.2 saved with one (say
`objective="mixed"`) is read as that class's (`selector_class`), once `trl_kgps.selectors.experimental` is imported.

The development builds of 0.3 (0.3.0.dev) wrote versions 3, 4 and 5 in layouts of their own and recorded no release;
0.3.0 writes as version 3 what the last of them wrote as 5. Their states are refused, naming the version and the fix
(`written_by_a_development_build`), never read as another layout, and so are their digests of the `prompt` column
alone (`digest_of_a_development_build`).
"""

from collections.abc import Collection
from typing import Any

import numpy as np

from ..config import PAPER, WITH_METADATA


DROPPED_IN = "1.0"

# `KGPSSelector` --------------------------------------------------------------------------------------------------

# The state versions of earlier releases read besides the current one: 0.1's and 0.2's.
KGPS_STATE_VERSIONS = (1, 2)
# What a version-1 state lacks, at the values the paper's selector ran with.
_VERSION_1_DEFAULTS = {
    "pass_order": np.empty(0, dtype=np.int64),
    "pass_position": 0,
    "gamma_scale": 1.0,
    "drift": 0.0,
    "group_size_seen": 8,  # the group size before one is seen
    "last_nis": float("nan"),
}
# The key under which a state records the release that wrote it: the file's `meta` and a `KGPSSelector`'s state, since
# 0.3.0 (no development build of 0.3 recorded one).
RELEASE = "trl_kgps"
# A config field that every state of 0.3.0 records and no development build's version 3 did (it came with their
# version 4, with the copies of a prompt sharing one belief): where a state records no release, a version-3 state
# whose config lacks it is one of theirs.
_RECORDED_SINCE_DEVELOPMENT = "prompt_key"
# What to do with a state a development build of 0.3 wrote: where a checkpoint resumes, and where a state is loaded.
DEVELOPMENT_RESUME_FIX = (
    "Resume with the build that wrote it, or start KGPS afresh from this checkpoint: move its kgps_state.npz out and "
    "pass KGPSConfig(restart_on_missing_state=True)"
)
DEVELOPMENT_LOAD_FIX = "Load it with the build that wrote it"


def written_by_a_development_build(state: dict[str, Any]) -> str | None:
    """
    For a `KGPSSelector` state that a development build of 0.3 wrote (one that records no release: version 4 or 5,
    or a version 3 whose config lacks `prompt_key`): why it is refused, naming its version, for the caller to add
    the fix (`DEVELOPMENT_RESUME_FIX` or `DEVELOPMENT_LOAD_FIX`); `None` for a state of a release.
    """
    version, config = state.get("version"), state.get("config")
    if state.get(RELEASE) is not None:
        return None
    older_three = version == 3 and isinstance(config, dict) and _RECORDED_SINCE_DEVELOPMENT not in config
    if version not in (4, 5) and not older_three:
        return None
    return (
        f"state version {version} was written by a development build of trl-kgps 0.3 (0.3.0.dev), whose states "
        "this release does not read: it reads versions 1 (trl-kgps 0.1), 2 (0.2) and 3 (0.3)"
    )


def kgps_state(state: dict[str, Any]) -> dict[str, Any]:
    """A `KGPSSelector` state of any version, with the entries version 1 lacks filled in where it lacks them."""
    return {**_VERSION_1_DEFAULTS, **state}


# The variants 0.1 and 0.2 saved in every `KGPSSelector` state's config (fields of `ExperimentalConfig` today), at what
# a `KGPSConfig` runs with.
_VARIANT_DEFAULTS = {
    "objective": "variance",
    "group_size": None,
    "candidate_pass": False,
    "shared_drift": 0.0,
    "process_noise_power": 1.0,
    "fixed_process_noise": None,
    "utility": "posterior",
}


def variants_saved(state: dict[str, Any]) -> dict[str, Any]:
    """
    The variants of KGPS a `KGPSSelector` state of 0.1 or 0.2 was saved with, by field (`ExperimentalConfig`'s today,
    and Thompson sampling): `{}` for one saved with none, and for a state of another version.
    """
    saved = state.get("config")
    if state.get("version") not in KGPS_STATE_VERSIONS or not isinstance(saved, dict):
        return {}
    variants = {
        name: saved[name] for name, default in _VARIANT_DEFAULTS.items() if saved.get(name, default) != default
    }
    if saved.get("selection") == "thompson":
        variants["selection"] = "thompson"
    return dict(sorted(variants.items()))


# The class that runs 0.1's and 0.2's variants of KGPS today, and the module that defines and registers it.
_VARIANT_CLASS, _VARIANT_MODULE = "ExperimentalSelector", "trl_kgps.selectors.experimental"


def selector_class(meta: dict[str, Any]) -> str | None:
    """
    The class whose state a state file's `meta` holds, as read today: the class it names (`meta["selector_class"]`),
    but `ExperimentalSelector` for a `KGPSSelector` state of 0.1 or 0.2 saved with a variant (`variants_saved`).
    """
    name, state = meta.get("selector_class"), meta.get("selector")
    if name == "KGPSSelector" and isinstance(state, dict) and variants_saved(state):
        return _VARIANT_CLASS
    return name


def saved_as(meta: dict[str, Any]) -> str | None:
    """For a state file whose selector `selector_class` reads as another class than the one it names: what wrote it,
    for messages; `None` otherwise."""
    if selector_class(meta) == meta.get("selector_class"):
        return None
    state = meta["selector"]
    release = {1: "0.1", 2: "0.2"}[state["version"]]
    return (
        f"trl-kgps {release} saved it as a {meta['selector_class']} with {_named(variants_saved(state))}, fields of "
        "ExperimentalConfig today"
    )


def _named(fields: dict[str, Any]) -> str:
    """`{"objective": "mixed"}` -> "objective='mixed'"."""
    return ", ".join(f"{name}={value!r}" for name, value in fields.items())


def kgps_config_fields(state: dict[str, Any], read: Collection[str]) -> dict[str, Any]:
    """
    The config fields a `KGPSSelector` state was saved with, for a selector whose config has the fields `read`: those
    of version 1 (the paper's selector) and version 2 (a per-prompt filter) with the fields added since at the values
    they ran with (gamma fixed), less the variants `read` lacks, which they hold at what a `KGPSConfig` runs with; a
    `ValueError` naming `ExperimentalSelector` for one a variant saved. A version-3 state's, as saved.
    """
    version, saved = state.get("version"), state["config"]
    if version not in KGPS_STATE_VERSIONS:
        return saved
    if version == 1:
        fields = {**PAPER, **saved}
    else:
        # A field it lacks ran at the default of its release, which a `None` now decides: `WITH_METADATA`'s.
        fields = {**WITH_METADATA, "process_noise_adaptation": 0.0, "shared_variance": 0.0, **saved}
    for name in _VARIANT_DEFAULTS.keys() & fields.keys() - set(read):
        del fields[name]
    variants = variants_saved(state)
    if variants and _VARIANT_DEFAULTS.keys() - set(read):
        raise ValueError(
            f"it was saved with {_named(variants)}, a variant of KGPS that {_VARIANT_CLASS} runs today: load it with "
            f"{_VARIANT_MODULE}.{_VARIANT_CLASS} (import that module first)"
        )
    return fields


def config_hint(state: dict[str, Any]) -> str | None:
    """For a state of an earlier default saved with another method than the run resuming it: the config to pass. None
    for one saved with a variant of KGPS, whose config is `ExperimentalConfig`'s."""
    if variants_saved(state):
        return None
    return {
        1: "pass KGPSCallback(KGPSConfig.paper()): its state version 1 was written by trl-kgps 0.1, whose only method "
        "was the paper's",
        2: "pass KGPSCallback(KGPSConfig.per_prompt()): its state version 2 was written by trl-kgps 0.2, whose "
        "default was that per-prompt filter",
    }.get(state.get("version"))


# The baselines ---------------------------------------------------------------------------------------------------

# Hyperparameters added after states were first saved -> the value that continues a state saved without them: MoPPS
# drew its candidates uniformly, GRESO adapted from its first batch.
ADDED_HYPERPARAMETERS: dict[str, dict[str, Any]] = {"mopps": {"pool": "uniform"}, "greso": {"adapt_after_epochs": 0}}
# A GRESO state without `epoch` is in its first epoch; without `rules`, it keeps the rules it was saved under (0).
GRESO_DEFAULTS = {"epoch": 0, "rules": 0}


def mopps_state(state: dict[str, Any], num_prompts: int) -> dict[str, Any]:
    """A MoPPS state saved before its epoch walk (no `order`): a new epoch starts at its next round, drawn from its
    generator."""
    return {"order": np.arange(num_prompts), "position": num_prompts, **state}


# The state file --------------------------------------------------------------------------------------------------


def ledger_arrays(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The ledger's state (`BatchLedger.state_dict`), with the lags, selection times and window that 0.1 and 0.2 did
    not save: lag 0 and no selection time for every pending batch, and an empty window."""
    pending = np.asarray(arrays["pending"])
    return {
        "pending_lags": np.zeros(pending.shape[0], dtype=np.int64),
        "pending_select_seconds": np.full(pending.shape[0], np.nan),
        "recent_batches": pending[:0],
        **arrays,
    }


def saved_asynchronously(arrays: dict[str, np.ndarray]) -> bool:
    """For a state whose trainer record does not name its loop (0.1 and 0.2 recorded none): the synchronous sampler's
    keeps the epoch's batches."""
    return "epoch_batches" not in arrays


def digest_warning(path: str, prompts: dict[str, Any] | None) -> str | None:
    """What a state's digest of its rows (`prompts`, or `None`) leaves unchecked: everything, for 0.1's and 0.2's,
    which recorded none."""
    if prompts is not None:
        return None
    return (
        f"{path} records no digest of its prompts (written before trl-kgps 0.3), so KGPS cannot check that this "
        "run's train dataset holds the same prompts in the same order."
    )


def digest_of_a_development_build(path: str, prompts: dict[str, Any] | None) -> str | None:
    """For a state whose digest of its rows (`prompts`) is of its `prompt` column only, as a development build of 0.3
    wrote it: why it is refused, and the fix; `None` otherwise."""
    if prompts is None or "rows" in prompts:
        return None
    return (
        f"{path} records the digest of its prompt column only, as a development build of trl-kgps 0.3 (0.3.0.dev) "
        f"wrote it, which this release does not read. {DEVELOPMENT_RESUME_FIX}."
    )
