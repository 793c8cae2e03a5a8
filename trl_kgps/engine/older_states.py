"""
States written by earlier trl-kgps releases, and how each reads today. Whatever a loader fills in or infers for a state
that predates a field is here and nowhere else. trl-kgps 1.0 drops all of it (`DROPPED_IN`): a state of a 0.x release
then loads with the release that wrote it, or its checkpoint resumes with KGPS started afresh
(`KGPSConfig(restart_on_missing_state=True)`).

What each release wrote, and what it lacks:

- 0.1: `KGPSSelector` state version 1, the paper's selector only: no candidate pass, calibration, drift or group size;
  no digest of the prompts, no trainer record, and no lags, selection times or recent batches in the ledger.
- 0.2: version 2, one filter per prompt by default (no shared factor); otherwise as 0.1.
- 0.3.0.dev: the digest of the `prompt` column alone, a trainer record without its loop, and every field of
  `ExperimentalConfig` with no config class.
- Version 3 (0.3): every `KGPSSelector` state holds what only the experimental variants use (the candidate pass,
  gamma's calibration, the group size last seen) and names its config class; a run with an `ExperimentalConfig`
  recorded its selector as a `KGPSSelector`. Version 4 keeps those in `ExperimentalSelector`'s states alone.
- Version 4: a `KGPSSelector` ran with gamma fixed; its config has no `process_noise_adaptation` and its state no
  `gamma_scale`. Version 5 calibrates gamma by default (`process_noise_adaptation=0.05`) and saves both.
- Baselines saved before their authors' recipes: MoPPS without `pool` or its epoch walk, GRESO without
  `adapt_after_epochs`, `epoch` and `rules` (it continues with the walk it was saved under,
  `GRESOSelector._select_before_rules`).
"""

from typing import Any

import numpy as np

from ..config import PAPER, WITH_METADATA


DROPPED_IN = "1.0"

# `KGPSSelector` --------------------------------------------------------------------------------------------------

# The state versions read besides the current one.
KGPS_STATE_VERSIONS = (1, 2, 3, 4)
# What a version-1 state lacks, at the values the paper's selector ran with (a version-4 `KGPSSelector`'s lacks
# `gamma_scale`, at the same 1.0).
_VERSION_1_DEFAULTS = {
    "pass_order": np.empty(0, dtype=np.int64),
    "pass_position": 0,
    "gamma_scale": 1.0,
    "drift": 0.0,
    "group_size_seen": 8,  # KGPSSelector's group size before it has seen one
    "last_nis": float("nan"),
}


def kgps_state(state: dict[str, Any]) -> dict[str, Any]:
    """A `KGPSSelector` state of any version, with the entries version 1 lacks filled in where it lacks them."""
    return {**_VERSION_1_DEFAULTS, **state}


def kgps_config_fields(state: dict[str, Any]) -> dict[str, Any]:
    """
    The config fields a `KGPSSelector` state was saved with: version 1 by the paper's selector and version 2 by a
    per-prompt filter, before the fields they lack existed; versions 1 to 4 with gamma fixed, unless their config
    names `process_noise_adaptation` (an `ExperimentalConfig`'s).
    """
    saved = state["config"]
    if state.get("version") == 1:
        return {**PAPER, **saved}
    if state.get("version") == 2:
        saved = {"shared_variance": 0.0, **saved}
    if state.get("version") in KGPS_STATE_VERSIONS:
        # A field it lacks ran at the default of its release, which a `None` now decides: `WITH_METADATA`'s.
        return {**WITH_METADATA, "process_noise_adaptation": 0.0, **saved}
    return saved


# `ExperimentalConfig`'s fields as versions 1 to 3 saved them in every `KGPSSelector` state, at what a `KGPSConfig`
# ran with (`process_noise_adaptation`, a `KGPSConfig` field since version 5, stays in its fields).
_VARIANT_DEFAULTS = {
    "objective": "variance",
    "group_size": None,
    "candidate_pass": False,
    "shared_drift": 0.0,
    "process_noise_power": 1.0,
    "fixed_process_noise": None,
    "utility": "posterior",
}


def plain_config_fields(state: dict[str, Any]) -> dict[str, Any]:
    """
    `kgps_config_fields` without the experimental fields a state of version 1 to 3 holds at what a `KGPSConfig`
    runs with; `ValueError` naming `ExperimentalSelector` for a state an experimental variant saved.
    """
    fields = dict(kgps_config_fields(state))
    variant = {name: fields.pop(name) for name in _VARIANT_DEFAULTS.keys() & fields.keys()}
    if (
        state.get("config_class") == "ExperimentalConfig"
        or fields.get("selection") == "thompson"
        or any(value != _VARIANT_DEFAULTS[name] for name, value in variant.items())
    ):
        raise ValueError(
            "it was saved by an experimental variant of KGPS (an ExperimentalConfig): load it with "
            "trl_kgps.selectors.experimental.ExperimentalSelector"
        )
    return fields


def selector_class(meta: dict[str, Any]) -> str | None:
    """The selector class a state file's `meta` holds: a version 3 `KGPSSelector` of an `ExperimentalConfig` is an
    `ExperimentalSelector`'s state today."""
    name = meta.get("selector_class")
    saved = meta.get("selector", {})
    if name == "KGPSSelector" and saved.get("version") == 3 and saved.get("config_class") == "ExperimentalConfig":
        return "ExperimentalSelector"
    return name


def config_hint(state: dict[str, Any]) -> str | None:
    """For a state of an earlier default saved with another method than the run resuming it: the config to pass."""
    return {
        1: "pass KGPSCallback(KGPSConfig.paper()): its state version 1 was written by trl-kgps 0.1, whose only method "
        "was the paper's",
        2: "pass KGPSCallback(KGPSConfig.per_prompt()): its state version 2 was written by trl-kgps 0.2, whose default "
        "was that per-prompt filter",
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
    """For a state whose trainer record does not name its loop: the synchronous sampler's keeps the epoch's batches."""
    return "epoch_batches" not in arrays


def digest_warning(path: str, prompts: dict[str, Any] | None) -> str | None:
    """What a state's digest of its rows (`prompts`, or `None`) leaves unchecked, when it is an earlier release's."""
    if prompts is None:
        return (
            f"{path} records no digest of its prompts (written before trl-kgps 0.3), so KGPS cannot check that this "
            "run's train dataset holds the same prompts in the same order."
        )
    if "rows" not in prompts:
        return (
            f"{path} records the digest of its prompt column only (written by trl-kgps 0.3.0.dev), so KGPS checked the "
            "order of this run's prompts but not of its other columns (images, answers)."
        )
    return None
