r"""
What KGPS learns across prompts: a shared factor over the prompts' features, beside each prompt's own residual.

The model. Prompt \\(i\\) has a feature row \\(z_i \in \mathbb{R}^D\\) of unit norm (see `design`), and its logit
success rate is a shared part plus a residual,

    psi_i = z_i^T beta + r_i,        beta ~ N(mu, Sigma)  (D x D, dense),        r_i ~ N(m_i, P_i),

with \\(\beta\\) independent of every \\(r_i\\) (the mean field: the joint belief is
\\(q(\beta) \prod_i q(r_i)\\)). Categorical features (a dataset's `level`, `type`, `source`) make \\(z_i\\) an
intercept plus one indicator per column; an embedding makes it an intercept plus the unit embedding; no feature
leaves the intercept alone, one factor shared by the whole pool. Two prompts' logits covary by
\\(z_i^T \Sigma z_j\\): observing some prompts of a level moves the level's other prompts, and a prompt never seen
starts from what its level has shown.

Prediction (the policy moved by \\(\lVert\Delta\theta\rVert\\), `KGPSSelector.predict` gives
\\(Q = \gamma \lVert\Delta\theta\rVert^p\\)): the shared part takes the share \\(\rho\\) of it,

    Sigma <- Sigma + rho Q I,        P_i <- P_i + (1 - rho) Q,

so every prompt's logit variance grows by \\(Q\\) (\\(\lVert z_i \rVert = 1\\)), as in the paper.

Update, for a batch of prompts \\(i\\) with \\(s_i\\) successes in \\(k_i\\) rollouts:

1. each prompt's exact binomial posterior from its marginal prior \\(\mathcal{N}(a_i, S_i)\\),
   \\(a_i = z_i^T\mu + m_i\\), \\(S_i = z_i^T \Sigma z_i + P_i\\), moment-matched to
   \\(\mathcal{N}(\hat a_i, \hat S_i)\\) (`_binomial.posterior_moments`), is written as the Gaussian pseudo-observation
   that gives the same update,

       y_i = psi_i + e_i,   e_i ~ N(0, R_i),   1 / R_i = 1 / S_i_hat - 1 / S_i,
       y_i = a_i + (a_i_hat - a_i) S_i / (S_i - S_i_hat);

2. the pseudo-observations update \\(\beta\\) exactly (the batch's residuals integrated out). The prompts of one row
   \\(z\\) all observe \\(z^T \beta\\), so they pool into one observation of precision \\(w = \sum_i 1 / (P_i + R_i)\\)
   and value \\(\bar y = \sum_i (y_i - m_i) / (P_i + R_i) / w\\). With the batch's \\(c\\) distinct rows \\(Z\\) and
   \\(V = \mathrm{diag}(1 / w)\\), the Kalman update in covariance form

       S = Z Sigma Z^T + V,   K = Sigma Z^T S^-1,   mu <- mu + K (y_bar - Z mu),   Sigma <- Sigma - K Z Sigma

   costs \\(O(c D^2 + c^3)\\), and one-hot rows make every product with \\(Z\\) a gather (`Design.active`);

3. each residual becomes its exact marginal under the joint posterior,

       g_i = P_i / (P_i + R_i),   m_i <- m_i + g_i (y_i - z_i^T mu_new - m_i),
       P_i <- (1 - g_i) P_i + g_i^2 z_i^T Sigma_new z_i.

After one batch from a factorised belief, every marginal is the exact joint posterior's (given the pseudo-
observations): every prompt's mean, \\(\beta\\)'s moments, and the variance of every prompt the batch did not hold.
What the mean field drops is the (negative) covariance between \\(\beta\\) and the residuals it just updated, so an
observed prompt's variance is over-stated, and later evidence about its group does not flow back into its residual.
`tests/unit/test_shared.py` measures both against the exact joint Kalman filter with a dense covariance;
docs/algorithm.md quotes the figures.
"""

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.lexicographic import row_keys
from ._binomial import posterior_moments
from .prior_rates import Rates


# The most distinct values that categorical features may hold together (D - 1): the shared part keeps a dense D x D
# covariance, and a round costs O(c D^2) for the c groups of a batch (docs/algorithm.md gives the measured cost).
MAX_CATEGORICAL_VALUES = 1024
# A pseudo-observation this uninformative (its precision relative to the prior's) changes nothing and is skipped.
_MIN_RELATIVE_PRECISION = 1e-9
# A label (or column name) longer than this is shortened where it names a group (`_short`).
_MAX_LABEL = 40
_EMBEDDING_DIMENSIONS = 64  # an embedding wider than this is projected onto its leading principal directions
_FIRST_LABELS = 4096  # `_labels` sorts a column's first rows, and looks the rest up among the labels they hold


class Design:
    r"""
    The feature rows \\(z_i\\) of `N` prompts, stored once per distinct row: `rows[row_of[i]]` is \\(z_i\\).

    Attributes:
        rows (`np.ndarray` of shape `(C, D)`, float64): the distinct rows, each of unit norm.
        row_of (`np.ndarray` of shape `(N,)`, int64): each prompt's row, an index into `rows`.
        names (`list[str]`): a readable name per row (`"level=3"`, `"all"`); empty for an embedding (a row per prompt).
        kind (`str`): `"global"` (no feature), `"categorical"` (a row per combination of labels: the prompts'
            groups) or `"embedding"` (a row per prompt).
        active (`np.ndarray` of shape `(C, A)`, int64, or `None`): the columns where each row is nonzero, for the
            one-hot rows of `"global"` and `"categorical"` (`A = 1 + F` for `F` columns), whose nonzeros all equal
            `weight`: \\(z^T x\\) is `weight * x[active].sum()`. `None` for an embedding's dense rows.
        prior_mean (`np.ndarray` of shape `(D,)`, float64): \\(\mu_0\\), the shared factor's prior mean: 0 but for
            the bins of a column of success rates (`prior_rates`), where \\(z_i^T \mu_0\\) is the bin's starting logit.
    """

    KINDS = ("global", "categorical", "embedding")

    def __init__(
        self,
        rows: np.ndarray,
        row_of: np.ndarray,
        names: Sequence[str],
        kind: str,
        prior_mean: np.ndarray | None = None,
    ):
        self.rows, self.row_of, self.names, self.kind = rows, row_of, list(names), kind
        self.prior_mean = np.zeros(rows.shape[1]) if prior_mean is None else prior_mean
        self.active: np.ndarray | None = None
        self.weight = 1.0
        if kind != "embedding":
            self.active = np.nonzero(rows)[1].reshape(rows.shape[0], -1)
            self.weight = float(rows[0, self.active[0, 0]])

    @property
    def dimension(self) -> int:
        return self.rows.shape[1]

    @property
    def num_cells(self) -> int:
        return self.rows.shape[0]

    @functools.cached_property
    def counts(self) -> np.ndarray:
        """`(C,)` int64: the prompts of each row (a categorical design's group sizes), counted once."""
        return np.bincount(self.row_of, minlength=self.num_cells)

    def same_as(self, other: "Design") -> bool:
        return np.array_equal(self.rows, other.rows) and np.array_equal(self.row_of, other.row_of)

    def state_dict(self) -> dict[str, Any]:
        return {
            "shared_rows": self.rows.copy(),
            "shared_cell": self.row_of.astype(np.int32),  # 4 bytes a prompt in the state file
            "shared_names": np.array(self.names),
            "shared_kind": self.kind,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any], num_prompts: int) -> "Design":
        rows = np.asarray(state["shared_rows"], dtype=np.float64)
        cell = np.asarray(state["shared_cell"])
        names = [str(name) for name in np.asarray(state["shared_names"]).tolist()]
        kind = str(state["shared_kind"])
        if (
            kind not in cls.KINDS
            or rows.ndim != 2
            or not np.isfinite(rows).all()
            or cell.shape != (num_prompts,)
            or cell.dtype.kind not in "iu"
            or len(names) != (0 if kind == "embedding" else rows.shape[0])
            or (cell.size and (cell.min() < 0 or cell.max() >= rows.shape[0]))
            or (kind != "embedding" and not _one_hot(rows))
        ):
            raise ValueError("state's shared_rows, shared_cell and shared_names do not fit together; it is corrupted.")
        return cls(rows, cell.astype(np.int64), names, kind)


def design(num_prompts: int, features: Any = None) -> Design:
    r"""
    The feature rows of `num_prompts` prompts.

    Args:
        num_prompts (`int`): `N`.
        features (*optional*): `None` (one factor shared by all prompts); a dict from feature names (e.g. dataset
            columns) to their values, one per prompt; or the values alone. Values are labels (shape `(N,)`, ints or
            strings: a categorical feature; several of them in a dict), success `prior_rates.Rates` (a categorical
            feature of their bins, each starting at its rates' logit), or a float array of shape `(N, E)` (an
            embedding per prompt, the only feature then; projected onto its 64 leading principal directions when
            `E > 64`).

    Returns:
        `Design`: categorical features give one row per distinct combination of labels, \\(z = (1, e_{c_1}, \dots,
        e_{c_F}) / \sqrt{1 + F}\\); an embedding \\(x_i\\) gives \\(z_i = (1, x_i / \lVert x_i \rVert) / \sqrt 2\\)
        (after centring), a row per prompt; nothing gives \\(z_i = (1)\\).

    Raises:
        `ValueError`: features of another length than `N`, with missing values (None, NaN), or of a type that is
            neither labels nor numbers, naming the feature and the fix.
    """
    if features is None:
        return Design(np.ones((1, 1)), np.zeros(num_prompts, dtype=np.int64), ["all"], "global")
    named = dict(features) if isinstance(features, dict) else {"feature": features}
    if not named:
        raise ValueError("features is an empty dict: give at least one feature, or None for one shared factor.")
    columns = [(name, _as_feature(name, values, num_prompts)) for name, values in named.items()]
    embeddings = [name for name, values in columns if values.ndim == 2]
    if embeddings and len(columns) > 1:
        raise ValueError(
            f"feature {embeddings[0]!r} is a vector per prompt (an embedding), which cannot be combined with other "
            "features: pass the embedding column alone, or only categorical columns."
        )
    if embeddings:
        return _embedding_design(*columns[0])
    starts = {name: named[name].logits(values) for name, values in columns if isinstance(named[name], Rates)}
    return _categorical_design(columns, starts)


def _as_feature(name: str, values, num_prompts: int) -> np.ndarray:
    """One feature as labels (shape `(N,)`, int or str) or an embedding (shape `(N, E)`, float64), checked; success
    `Rates` as their bins' labels."""
    if isinstance(values, Rates):
        values = values.labels()
    try:
        array = np.asarray(values)
    except ValueError:  # ragged vectors
        raise ValueError(
            f"feature {name!r} holds vectors of different lengths: an embedding column needs one vector of the same "
            "length per prompt."
        ) from None
    if array.shape[:1] != (num_prompts,):
        raise ValueError(
            f"feature {name!r} has {array.shape[0] if array.ndim else 'no'} values for {num_prompts} prompts: give "
            "one value per prompt of the train dataset, in its order."
        )
    if array.dtype == object:
        missing = [i for i, v in enumerate(array.tolist()) if v is None or (isinstance(v, float) and v != v)]
        if missing:
            raise ValueError(
                f"feature {name!r} is missing at prompt {missing[0]} ({len(missing)} prompts in all): fill it (e.g. "
                f"with 'unknown') or drop those rows before training."
            )
        raise ValueError(
            f"feature {name!r} holds values of type {type(array.flat[0]).__name__} (first {array.flat[0]!r}): a "
            "categorical column needs ints or strings, an embedding column a float vector per prompt."
        )
    if array.dtype.kind == "f" and array.ndim == 1:
        if not np.isfinite(array).all():
            bad = int(np.flatnonzero(~np.isfinite(array))[0])
            raise ValueError(
                f"feature {name!r} is NaN or infinite at prompt {bad}: fill the missing values or drop those rows "
                "before training."
            )
        if not np.array_equal(array, np.round(array)):
            raise ValueError(
                f"feature {name!r} holds fractional numbers (e.g. {array[array != np.round(array)][0]!r}): a "
                "categorical column needs labels (ints or strings); bin a continuous difficulty score first."
            )
        return array.astype(np.int64)
    if array.dtype.kind in "iub" and array.ndim == 1:
        return array.astype(np.int64)
    if array.dtype.kind in "US" and array.ndim == 1:
        if not isinstance(values, np.ndarray):  # numpy turns [1, "1"] into two equal strings
            other = next((v for v in values if not isinstance(v, str)), None)
            if other is not None:
                raise ValueError(
                    f"feature {name!r} mixes strings with values of type {type(other).__name__} (e.g. {other!r}), "
                    f"which would be read as the text {str(other)!r}: give every label of a column one type."
                )
        return array.astype(str)
    if array.dtype.kind in "iuf" and array.ndim == 2:
        array = array.astype(np.float64)
        if not np.isfinite(array).all():
            bad = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])
            raise ValueError(f"feature {name!r} holds NaN or infinite values at prompt {bad}: fix or drop that row.")
        return array
    raise ValueError(
        f"feature {name!r} has values of type {array.dtype} and shape {array.shape}: a categorical column needs one "
        "int or string per prompt, an embedding column one float vector per prompt."
    )


def _categorical_design(columns: list[tuple[str, np.ndarray]], starts: dict[str, dict[str, float]]) -> Design:
    """The one-hot design of labelled `columns`; `starts` gives the starting logit of each label of a column of
    success rates, from which `prior_mean` follows."""
    codes, levels = [], []
    for _, values in columns:
        level, code = _labels(values)
        codes.append(code)
        levels.append(level)
    values = sum(len(level) for level in levels)
    if values > MAX_CATEGORICAL_VALUES:
        counts = ", ".join(f"{name!r} {len(level):,}" for (name, _), level in zip(columns, levels))
        raise ValueError(
            f"feature columns with {values:,} distinct values in all ({counts}): KGPS shares across at most "
            f"{MAX_CATEGORICAL_VALUES:,}, since it keeps an exact covariance over them (a {values + 1:,} x "
            f"{values + 1:,} matrix, updated at every step). A column with a value per prompt or nearly (an id, a "
            "problem text) has nothing to share. Name a coarser column (or bin this one, e.g. into difficulty "
            "levels), give an embedding column (one vector per prompt), or set feature_columns=[]: one factor "
            "shared by the whole pool."
        )
    offsets = np.cumsum([1] + [len(level) for level in levels])  # the intercept, then each column's indicators
    # np.unique(np.stack(codes, axis=1), axis=0), whose row-by-row sort takes a second on a million prompts
    _, first, cell = np.unique(
        row_keys(codes, [len(level) for level in levels]), return_index=True, return_inverse=True
    )
    distinct = np.stack(codes, axis=1)[first]  # (C, F): each group's codes, in lexicographic order
    rows = np.zeros((len(distinct), int(offsets[-1])))
    rows[:, 0] = 1.0
    for j in range(len(columns)):
        rows[np.arange(len(distinct)), offsets[j] + distinct[:, j]] = 1.0
    rows /= np.sqrt(1 + len(columns))
    prior_mean = np.zeros(rows.shape[1])
    for j, (name, _) in enumerate(columns):
        for code, label in enumerate(levels[j].tolist()):  # z^T mu_0 = weight * mu_0[indicator] = the start
            prior_mean[offsets[j] + code] = starts.get(name, {}).get(label, 0.0) * np.sqrt(1 + len(columns))
    names = [
        ", ".join(
            f"{_short(name)}={_short(str(levels[j][code]))}" for j, ((name, _), code) in enumerate(zip(columns, combo))
        )
        for combo in distinct
    ]
    return Design(rows, cell.reshape(-1).astype(np.int64), names, "categorical", prior_mean)


def _labels(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """
    `np.unique(values, return_inverse=True)` for the labels of one column, `(N,)` ints or strings: the sorted distinct
    labels `(L,)`, and each prompt's index among them `(N,)` int64. Sorting a million strings takes a second; the
    labels of the column's first rows are sorted instead, every row is looked up among them by bisection, O(N log L),
    and the labels of the rows not found are added (a second look-up).
    """
    levels = np.unique(values[:_FIRST_LABELS])
    code = np.minimum(np.searchsorted(levels, values), len(levels) - 1)
    if not np.array_equal(levels[code], values):
        levels = np.union1d(levels, values[levels[code] != values])
        code = np.searchsorted(levels, values)
    return levels, code.astype(np.int64)


def _short(label: str) -> str:
    """A label as it names a group in metric keys, the model card and the difficulty table: as it is up to
    `_MAX_LABEL` characters, else its start and a digest of the whole, which keeps distinct labels distinct."""
    if len(label) <= _MAX_LABEL:
        return label
    digest = hashlib.blake2b(label.encode(), digest_size=4).hexdigest()
    return f"{label[: _MAX_LABEL - 11]}...{digest}"


def _one_hot(rows: np.ndarray) -> bool:
    """Whether every row has the same number of nonzeros, all of one value (what `Design.active` reads)."""
    nonzero = rows != 0
    return bool(nonzero[:, 0].all() and (nonzero.sum(axis=1) == nonzero[0].sum()).all() and np.ptp(rows[nonzero]) == 0)


def _embedding_design(name: str, x: np.ndarray) -> Design:
    x = x - x.mean(axis=0)
    if x.shape[1] > _EMBEDDING_DIMENSIONS:
        _, _, vt = np.linalg.svd(x[:: max(1, x.shape[0] // 20_000)], full_matrices=False)
        x = x @ vt[:_EMBEDDING_DIMENSIONS].T
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    rows = np.hstack([np.ones((x.shape[0], 1)), x]) / np.sqrt(2.0)
    rows[norms[:, 0] == 0] = np.eye(1, rows.shape[1])  # a prompt whose embedding is the mean: the intercept alone
    return Design(rows, np.arange(x.shape[0], dtype=np.int64), [], "embedding")


def pseudo_observations(
    a: np.ndarray, S: np.ndarray, a_hat: np.ndarray, S_hat: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    r"""
    The Gaussian observation \\(y = \psi + e\\), \\(e \sim \mathcal{N}(0, R)\\), that takes the prior
    \\(\mathcal{N}(a, S)\\) to the posterior \\(\mathcal{N}(\hat a, \hat S)\\):
    \\(1/R = 1/\hat S - 1/S\\), \\(y = a + (\hat a - a) S / (S - \hat S)\\). All of shape `(n,)`, float64; `R = inf`
    (and `y = a`) where the posterior is no narrower than the prior (an uninformative outcome).
    """
    precision = 1.0 / S_hat - 1.0 / S  # > 0: the binomial likelihood is log-concave
    informative = precision * S > _MIN_RELATIVE_PRECISION
    R = np.full_like(a, np.inf)
    y = a.copy()
    R[informative] = 1.0 / precision[informative]
    y[informative] = a[informative] + (a_hat - a)[informative] * S[informative] / (S - S_hat)[informative]
    return y, R


class SharedFactor:
    r"""
    The belief \\(\beta \sim \mathcal{N}(\mu, \Sigma)\\) over the shared factor of the prompts in `design`.

    Args:
        design (`Design`): the prompts' feature rows, and the prior mean \\(\mu_0\\) (`design.prior_mean`).
        variance (`float`): the prior \\(\Sigma_0 = \sigma^2 I\\): every prompt's shared part starts with variance
            \\(\sigma^2\\).

    Attributes:
        mu (`np.ndarray` of shape `(D,)`, float64), Sigma (`np.ndarray` of shape `(D, D)`, float64).
    """

    def __init__(self, design: Design, variance: float):
        self.design = design
        self.mu = design.prior_mean.copy()
        self.Sigma = variance * np.eye(design.dimension)

    def moments(self, indices: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        r"""
        The shared part's mean \\(z_i^T \mu\\) and variance \\(z_i^T \Sigma z_i\\) of the prompts `indices` (all by
        default), each of shape `(n,)`, float64; computed once per distinct row when that is cheaper.
        """
        cell = self.design.row_of if indices is None else self.design.row_of[indices]
        if self.design.num_cells <= cell.size:
            mean, variance = self.cell_moments()
            return mean[cell], variance[cell]
        return self._row_moments(cell)

    def group_success(self) -> np.ndarray:
        r"""
        Per distinct row (a group, for categorical features), shape `(C,)`: \\(\sigma(z^T \mu)\\), the success rate
        the shared part predicts for a prompt of the group with no evidence of its own.
        """
        return 1.0 / (1.0 + np.exp(-self.cell_moments()[0]))

    def cell_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """The shared part's mean and variance for each distinct row, shape `(C,)` each."""
        return self._row_moments(np.arange(self.design.num_cells))

    def _row_moments(self, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""\\(z^T \mu\\) and \\(z^T \Sigma z\\) of the rows `cells` (shape `(n,)`), each of shape `(n,)`."""
        active = self.design.active
        if active is None:
            z = self.design.rows[cells]
            return z @ self.mu, np.maximum(np.einsum("nd,de,ne->n", z, self.Sigma, z), 0.0)
        a, w = active[cells], self.design.weight  # (n, A): O(n A^2), whatever D
        variance = w**2 * self.Sigma[a[:, :, None], a[:, None, :]].sum(axis=(1, 2))
        return w * self.mu[a].sum(axis=1), np.maximum(variance, 0.0)

    def _rows_times(self, cells: np.ndarray, x: np.ndarray) -> np.ndarray:
        r"""\\(Z x\\) for the rows `cells` (shape `(c,)`) and `x` of shape `(D, k)`: shape `(c, k)`."""
        if self.design.active is None:
            return self.design.rows[cells] @ x
        return self.design.weight * x[self.design.active[cells]].sum(axis=1)

    def predict(self, noise: float) -> None:
        r"""\\(\Sigma \mathrel{+}= \rho Q I\\): `noise` is \\(\rho Q\\), the shared part's logit variance per round."""
        self.Sigma[np.diag_indices_from(self.Sigma)] += noise

    def update(
        self, indices: np.ndarray, m: np.ndarray, P: np.ndarray, s: np.ndarray, k: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
        r"""
        Updates \\(\beta\\) with a batch of binomial outcomes and returns the batch's residuals' posterior marginals
        (see the module's docstring).

        Args:
            indices (`np.ndarray` of shape `(n,)`, int64): distinct prompts, each with `k > 0`.
            m, P (`np.ndarray` of shape `(n,)`, float64): their residuals' prior means and variances.
            s, k (`np.ndarray` of shape `(n,)`, float64): successes and trials.

        Returns:
            `(m_new, P_new, (a, S))`: the residuals' posterior means and variances, and each prompt's prior logit mean
            and variance (what its outcome was predicted from).
        """
        shared_mean, shared_variance = self._row_moments(self.design.row_of[indices])
        a, S = shared_mean + m, shared_variance + P
        y, R = pseudo_observations(a, S, *posterior_moments(a, S, s, k))
        m_new, P_new = self.absorb(indices, m, P, y, R)
        return m_new, P_new, (a, S)

    def absorb(
        self, indices: np.ndarray, m: np.ndarray, P: np.ndarray, y: np.ndarray, R: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        r"""
        The exact update by Gaussian observations \\(y_i = \psi_i + e_i\\), \\(e_i \sim \mathcal{N}(0, R_i)\\), of
        \\(\beta\\), and the residuals' posterior marginals (steps 2 and 3 of the module's docstring). `R = inf`
        observes nothing.

        Args:
            indices (`np.ndarray` of shape `(n,)`, int64): distinct prompts.
            m, P (`np.ndarray` of shape `(n,)`, float64): their residuals' prior means and variances.
            y, R (`np.ndarray` of shape `(n,)`, float64): the observations and their variances.

        Returns:
            `(m_new, P_new)`, each of shape `(n,)`, float64.
        """
        seen = np.isfinite(R)
        m_new, P_new = m.copy(), P.copy()
        if not seen.any():
            return m_new, P_new
        cells, m, P, y, R = self.design.row_of[indices[seen]], m[seen], P[seen], y[seen], R[seen]
        # beta's exact update by y = z^T beta + r + e, with r ~ N(m, P) integrated out: each row's observations
        # pooled into one, then the covariance form over the batch's c distinct rows Z, O(c D^2 + c^3).
        weight = 1.0 / (P + R)
        if self.design.active is None:  # a row per prompt, and the batch's prompts are distinct
            rows, precision, y_bar = cells, weight, y - m
        else:  # by bincount, O(C), less than the O(c D^2) below; np.unique's sort would make the peak memory vary
            precision = np.bincount(cells, weight, minlength=self.design.num_cells)
            rows = np.flatnonzero(precision)
            y_bar = np.bincount(cells, weight * (y - m), minlength=self.design.num_cells)[rows] / precision[rows]
            precision = precision[rows]
        ZSigma = self._rows_times(rows, self.Sigma)  # (c, D)
        S = self._rows_times(rows, ZSigma.T) + np.diag(1.0 / precision)  # S = Z Sigma Z^T + V, (c, c)
        K = np.linalg.solve(S, ZSigma).T  # K = Sigma Z^T S^-1, (D, c)
        self.mu = self.mu + K @ (y_bar - self._rows_times(rows, self.mu[:, None])[:, 0])
        Sigma = self.Sigma - K @ ZSigma
        self.Sigma = (Sigma + Sigma.T) / 2
        # Each residual's marginal under the joint posterior.
        shared_mean, shared_variance = self._row_moments(cells)
        g = P / (P + R)
        m_new[seen] = m + g * (y - shared_mean - m)
        P_new[seen] = (1.0 - g) * P + g**2 * shared_variance
        return m_new, P_new

    def state_dict(self) -> dict[str, Any]:
        return {"shared_mu": self.mu.copy(), "shared_Sigma": self.Sigma.copy(), **self.design.state_dict()}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any], num_prompts: int) -> "SharedFactor":
        """Checks a `state_dict()` whole (`ValueError` if it does not fit) and builds the factor from it."""
        design = Design.from_state_dict(state, num_prompts)
        mu = np.asarray(state["shared_mu"], dtype=np.float64)
        Sigma = np.asarray(state["shared_Sigma"], dtype=np.float64)
        D = design.dimension
        if mu.shape != (D,) or Sigma.shape != (D, D) or not (np.isfinite(mu).all() and np.isfinite(Sigma).all()):
            raise ValueError(f"state's shared_mu and shared_Sigma are not a finite {D}-dimensional belief.")
        if not np.allclose(Sigma, Sigma.T) or np.linalg.eigvalsh(Sigma).min() < -1e-9:
            raise ValueError("state's shared_Sigma is not a covariance (symmetric, positive semi-definite).")
        factor = cls(design, 1.0)
        factor.mu, factor.Sigma = mu, Sigma
        return factor
