"""The prompt features KGPS shares across prompts, read from the train dataset's columns (`feature_columns`)."""

from typing import Any

import numpy as np

from ..config import KGPSConfig
from ..engine.protocol import PromptSelector
from .registry import build_selector


def selector_for(name: str, dataset: Any, config: KGPSConfig, seed: int) -> PromptSelector:
    """
    The selector `name` (see `selectors.SELECTORS`) over the rows of `dataset`; KGPS shares across them by the
    columns `config.feature_columns`. Raises `ValueError` for a column the dataset lacks or values KGPS cannot use.
    """
    features = read_features(dataset, config.feature_columns) if name == "kgps" else None
    return build_selector(name, len(dataset), config, seed, features)


def read_features(dataset: Any, columns: list[str] | None) -> dict[str, np.ndarray] | None:
    """
    `{column: values}` for `KGPSSelector(features=...)`, one value per row of `dataset` in its order (so identical on
    every rank), or `None` when `columns` is `None`. The values' checks (missing values, types) are `design`'s.

    Raises:
        `ValueError`: a column the dataset does not have, naming the columns it has.
    """
    if columns is None:
        return None
    available = list(getattr(dataset, "column_names", None) or [])
    missing = [column for column in columns if column not in available]
    if missing:
        raise ValueError(
            f"feature_columns names {missing}, which the train dataset does not have (its columns: {available}). "
            "Name columns it has, e.g. MATH's 'level' and 'type', or leave feature_columns unset for one factor "
            "shared by all prompts."
        )
    features = {}
    for column in columns:
        values = dataset[column]
        if values and isinstance(values[0], (list, tuple)):  # an embedding column: one vector per row
            try:
                values = np.asarray(values, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    f"feature column {column!r} holds vectors that are not all numbers of one length: an embedding "
                    "column needs a float vector of the same length in every row."
                ) from None
        else:
            values = np.asarray(values, dtype=object if any(v is None for v in values) else None)
        features[column] = values
    return features
