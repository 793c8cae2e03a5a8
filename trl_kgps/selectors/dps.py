r"""
DPS, Dynamics-Predictive Sampling (ICLR 2026, arXiv 2603.10887): a hidden Markov model of each prompt's solving state.

Each prompt is in one of three states, all wrong, mixed or all right (a group of rollouts with no success, some, or
all), and moves between them by its own transition matrix. DPS keeps, per prompt \\(i\\):

- \\(A_i\\) (`3 x 3`): Dirichlet counts of the transitions, \\(A[j, l]\\) for a move from state \\(l\\) to state
  \\(j\\); the expected transition matrix is \\(T = A / \mathbf{1}^T A\\) (each column sums to one);
- \\(\pi_i\\): the predicted distribution of its state at the next step, and \\(\pi^-_i\\) the one a step earlier.

A step of the chain (the authors' `train`, once per scored batch) does, with the decay \\(\lambda\\) and the prior
counts \\(A_0\\):

- for an observed prompt, whose state \\(o\\) is read from its group (no success, some, all) as exact:

      U = (e_o (pi^-)^T) * T(A) / sum(...)            the soft count of the move pi^- -> o
      A <- lambda A + (1 - lambda) A_0 + U,   pi^- <- e_o,   pi <- T(A) e_o

- for every other prompt that was ever a candidate: \\(A \leftarrow \lambda A + (1 - \lambda) A_0\\),
  \\(\pi^- \leftarrow \pi\\), \\(\pi \leftarrow T(A) \pi\\).

Selection draws a pool of `candidate_ratio * B` candidates in epoch order (the authors' data loader) and keeps the
`B` of highest \\(\pi[\text{mixed}]\\) (plus `entropy_weight` times the entropy of \\(\pi\\)).

The authors' loop visits every prompt ever seen at every step. Here a prompt moves only when it is read: its last
state is stored with the step it was taken at, and reading it runs the steps it missed, vectorised over the prompts
read (exactly, for as many steps as \\(\lambda^j\\) takes to fall below float64's resolution, and by repeated squaring
of the then-constant \\(T\\) after that), so a round costs \\(O(\text{candidates})\\), not \\(O(N)\\).
"""

import math
from typing import Any

import numpy as np

from ._checks import as_index_array, as_observations
from .baselines import _Epochs


ALL_WRONG, MIXED, ALL_RIGHT = 0, 1, 2
# The authors' prior counts A_0 (`hmm_prior_alpha`): a float fills the 3 x 3 matrix; columns are the state moved from.
PRIORS = {
    "progress": np.array([[1.0, 0.5, 0.5], [1.0, 1.0, 0.5], [1.0, 1.0, 1.0]]),
    "stability": np.array([[1.0, 0.5, 0.5], [0.5, 1.0, 0.5], [0.5, 0.5, 1.0]]),
    "local": np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]),
}
_STATE_SUCCESS = np.array([0.0, 0.5, 1.0])  # the success rate `predicted_success` gives each state
_UNIFORM = np.full(3, 1.0 / 3.0)


class DPSSelector(_Epochs):
    r"""
    DPS (Dynamics-Predictive Sampling): the top-`B` by predicted chance of a mixed group, among candidates.

    The defaults are the authors' MATH recipe (`recipe/dps/scripts/math/*_dps.sh`): prior counts 1, decay 0.7, 32
    candidates per selected prompt; their Countdown and Geometry3K recipes use `decay=0.5`, `candidate_ratio=8`.
    The initial state distribution is uniform, as in all their recipes.

    Args:
        num_prompts (`int`): the pool size.
        prior (`float` or `str`, *optional*, defaults to `1.0`): \\(A_0\\), the prior transition counts: a positive
            float for every entry, or one of the authors' presets `"progress"`, `"stability"`, `"local"`.
        decay (`float`, *optional*, defaults to `0.7`): \\(\lambda\\) in `[0, 1]`, how much of its counts a prompt
            keeps at each step (the rest returns to the prior).
        candidate_ratio (`float`, *optional*, defaults to `32.0`): candidates per selected prompt; the pool is all
            allowed prompts when it is larger (`float("inf")`: always).
        entropy_weight (`float`, *optional*, defaults to `0.0`): the weight of the entropy of \\(\pi\\) added to
            \\(\pi[\text{mixed}]\\) (the authors' `topk+entropy`; 0 is their `topk`, used in every recipe).
        seed (`int`, *optional*, defaults to `0`): seeds the candidates' order.

    One step of the chain is one call of `update` (or `initialize`) that observes at least one prompt: the authors'
    `train`, once per scored batch. Ties in \\(\pi[\text{mixed}]\\) go to the candidate drawn first. Where an observed
    move has no prior count (`"local"` forbids all wrong <-> all right), no count is added: the authors' code divides
    by zero there. `predicted_success` is the state distribution's mean success, all wrong 0, mixed 1/2, all right 1.
    """

    name = "dps"
    hyperparameters = ("prior", "decay", "candidate_ratio", "entropy_weight")

    def __init__(
        self,
        num_prompts: int,
        prior: float | str = 1.0,
        decay: float = 0.7,
        candidate_ratio: float = 32.0,
        entropy_weight: float = 0.0,
        seed: int = 0,
    ):
        if isinstance(prior, str) and prior not in PRIORS:
            raise ValueError(f"prior={prior!r} is not one of {list(PRIORS)}; pass one of those or a positive float.")
        if not isinstance(prior, str) and not (isinstance(prior, (int, float)) and prior > 0):
            raise ValueError(f"prior must be a positive float (every prior count) or a preset name, got {prior!r}.")
        if not (isinstance(decay, (int, float)) and 0 <= decay <= 1):
            raise ValueError(f"decay must lie in [0, 1], got {decay!r}.")
        if not (isinstance(candidate_ratio, (int, float)) and candidate_ratio >= 1):
            raise ValueError(
                f"candidate_ratio must be >= 1 (candidates per selected prompt), got {candidate_ratio!r}."
            )
        if not (isinstance(entropy_weight, (int, float)) and entropy_weight >= 0):
            raise ValueError(f"entropy_weight must be >= 0, got {entropy_weight!r}.")
        super().__init__(num_prompts, seed)
        self.prior, self.decay, self.candidate_ratio, self.entropy_weight = (
            prior,
            decay,
            candidate_ratio,
            entropy_weight,
        )
        self.A0 = PRIORS[prior].copy() if isinstance(prior, str) else np.full((3, 3), float(prior))
        n = self.num_prompts
        # Each prompt as of the step `touched` (-1: never a candidate nor observed, so still at the prior).
        self.A = np.broadcast_to(self.A0, (n, 3, 3)).copy()  # (N, 3, 3) transition counts, [to, from]
        self.pi = np.broadcast_to(_UNIFORM, (n, 3)).copy()  # (N, 3) predicted state distribution
        self.pi_before = self.pi.copy()  # (N, 3) the distribution a step earlier
        self.touched = np.full(n, -1, dtype=np.int64)
        self._counted = np.zeros(n, dtype=bool)  # whether a prompt's counts have left the prior (it was observed)
        self.steps = 0  # steps of the chain so far
        # Steps after which lambda^j A moves no float64 count: beyond them T stays constant, and is squared instead.
        self._exact_steps = 0 if decay == 1 else 1 if decay == 0 else math.ceil(-54 * math.log(2) / math.log(decay))

    # Reading ------------------------------------------------------------------------------------------------------

    def _advanced(self, indices: np.ndarray, to_step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        r"""
        `(A, pi, pi_before)` of the prompts `indices` (shapes `(n, 3, 3)`, `(n, 3)`, `(n, 3)`) at step `to_step`,
        unobserved since their last touch; prompts never touched stay at the prior. Nothing is stored.

        A prompt whose counts left the prior moves by the exact step-varying chain for as many steps as
        \\(\lambda^j\\) takes to fall below float64's resolution; from there, \\(T\\) is constant and its steps are
        taken by repeated squaring. A prompt never observed keeps the prior's counts, and so the prior's \\(T\\)
        from the start: one matrix for all of them, raised once to each number of steps missed.
        """
        touched = self.touched[indices]
        missed = np.where(touched >= 0, np.maximum(to_step - touched, 0), 0)
        pi, pi_before = self.pi[indices], self.pi_before[indices]
        counted = np.flatnonzero(self._counted[indices])  # only these have counts of their own to read
        A = np.broadcast_to(self.A0, (indices.size, 3, 3)).copy()
        A[counted] = self.A[indices[counted]]

        prior = np.flatnonzero(~self._counted[indices] & (missed > 0))
        if prior.size:  # pi^- = T0^(r-1) pi, pi = T0 pi^-, each distinct r raised once
            T0 = _transitions(self.A0[None])[0]
            values, inverse = np.unique(missed[prior] - 1, return_inverse=True)
            x = _normalized(np.einsum("nij,nj->ni", _powers(T0, values)[inverse], pi[prior]))
            pi_before[prior], pi[prior] = x, _normalized(x @ T0.T)

        exact = np.minimum(missed[counted], self._exact_steps)
        if exact.any():
            # Sorted by exact steps, longest first: the prompts that take step j are a prefix.
            order = np.argsort(-exact, kind="stable")
            rows, steps = counted[order[: np.count_nonzero(exact)]], exact[order[: np.count_nonzero(exact)]]
            # j steps without an observation: A_j = A_0 + lambda^j D, D = A - A_0, column sums c_j = c_0 + lambda^j d.
            # Prompts along the last axis, so that each step is a few passes over contiguous rows.
            D = (A[rows] - self.A0).transpose(1, 2, 0).copy()  # (3, 3, n)
            d, c0 = D.sum(axis=0), self.A0.sum(axis=0)[:, None]  # (3, n), (3, 1)
            p, previous = pi[rows].T.copy(), pi_before[rows].T.copy()  # (3, n)
            live = np.searchsorted(-steps, -np.arange(1, steps[0] + 1), side="right")  # live[j - 1]: how many take j
            for j, n in enumerate(live, start=1):
                # pi^- <- pi,   pi <- T(A_j) pi = A_j (pi / c_j), normalised
                scale = self.decay**j
                w = p[:, :n] / (c0 + scale * d[:, :n])
                u = self.A0 @ w + scale * np.einsum("ijn,jn->in", D[:, :, :n], w)
                previous[:, :n] = p[:, :n]
                p[:, :n] = u / u.sum(axis=0)
            pi[rows], pi_before[rows] = p.T, previous.T
            A[rows] = self.A0 + self.decay ** steps[:, None, None] * (A[rows] - self.A0)
        rest = missed[counted] - exact
        later = rest > 0
        rows, rest = counted[later], rest[later]
        if rows.size:  # T is constant from here: pi^- = T^(r-1) pi, pi = T pi^-
            T, power, x = _transitions(A[rows]), rest - 1, pi[rows]
            while power.max() > 0:  # x <- T^(r-1) x by repeated squaring, each prompt its own exponent
                odd = power % 2 == 1
                x[odd] = _normalized(np.einsum("nij,nj->ni", T[odd], x[odd]))
                T, power = T @ T, power // 2
            pi_before[rows] = x
            pi[rows] = _normalized(_times(A[rows], x))
            A[rows] = self.A0 + self.decay ** rest[:, None, None] * (A[rows] - self.A0)
        return A, pi, pi_before

    def _store(
        self, indices: np.ndarray, A: np.ndarray | None, pi: np.ndarray, pi_before: np.ndarray, step: int
    ) -> None:
        """Writes `indices`' beliefs as of `step`; their counts `A` too where they have left the prior."""
        self.pi[indices], self.pi_before[indices], self.touched[indices] = pi, pi_before, step
        counted = self._counted[indices]
        self.A[indices[counted]] = A[counted]

    def state_distribution(self, indices=None) -> np.ndarray:
        """The predicted state distribution (all wrong, mixed, all right) of `indices` (all by default), `(n, 3)`."""
        idx = np.arange(self.num_prompts) if indices is None else as_index_array("indices", indices, self.num_prompts)
        return self._advanced(idx, self.steps)[1]

    def predicted_success(self, indices=None) -> np.ndarray:
        return self.state_distribution(indices) @ _STATE_SUCCESS

    # Choosing and observing ---------------------------------------------------------------------------------------

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        batch_size, excluded = self._excluded(batch_size, exclude)
        allowed, wanted = self.num_prompts - excluded.size, self.candidate_ratio * batch_size
        pool = allowed if wanted >= allowed else math.ceil(wanted)
        candidates = self._walk(pool, excluded)
        A, pi, pi_before = self._advanced(candidates, self.steps)
        # A candidate is registered from now on: the steps it is not observed in move it.
        self._store(candidates, A, pi, pi_before, self.steps)
        score = pi[:, MIXED]
        if self.entropy_weight:
            score = score + self.entropy_weight * -(pi * np.log(pi + 1e-10)).sum(axis=1)
        return candidates[np.argsort(-score, kind="stable")[:batch_size]]

    def update(self, indices, successes, trials) -> None:
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        if not idx.size:
            return
        self.steps += 1
        A, _, pi_before = self._advanced(idx, self.steps - 1)
        state = np.where(s == 0, ALL_WRONG, np.where(s == k, ALL_RIGHT, MIXED))
        observed = np.eye(3)[state]  # (n, 3): the state, taken as exact
        # U = (e_o (pi^-)^T) * T(A) / sum: the soft count of the move from last step's belief to the observed state
        U = observed[:, :, None] * pi_before[:, None, :] * _transitions(A)
        total = U.sum(axis=(1, 2), keepdims=True)
        U = np.divide(U, total, out=np.zeros_like(U), where=total > 0)
        # A <- lambda A + (1 - lambda) A_0 + U,   pi^- <- e_o,   pi <- T(A) e_o
        A = self.decay * A + (1.0 - self.decay) * self.A0 + U
        pi = _normalized(_times(A, observed))
        self._counted[idx] = True
        self._store(idx, A, pi, observed, self.steps)

    # State --------------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(
            **self._walk_state(),
            A=self.A.copy(),
            pi=self.pi.copy(),
            pi_before=self.pi_before.copy(),
            touched=self.touched.copy(),
            steps=self.steps,
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = self.num_prompts
        rng = self._open(
            state,
            {
                "order": ((n,), "i"),
                "A": ((n, 3, 3), "f"),
                "pi": ((n, 3), "f"),
                "pi_before": ((n, 3), "f"),
                "touched": ((n,), "i"),
            },
        )
        A, pi, pi_before = (np.asarray(state[key], dtype=np.float64) for key in ("A", "pi", "pi_before"))
        touched, steps = np.asarray(state["touched"], dtype=np.int64), int(state["steps"])
        distributions = np.concatenate([pi, pi_before])
        if not (
            np.isfinite(A).all()
            and (A >= 0).all()
            and np.isfinite(distributions).all()
            and (distributions >= 0).all()
            and np.allclose(distributions.sum(axis=1), 1.0)
            and 0 <= steps
            and (touched >= -1).all()
            and (touched <= steps).all()
        ):
            raise ValueError("state holds transition counts or state distributions out of range; it is corrupted.")
        self._load_walk(state)
        self._rng, self.A, self.pi, self.pi_before = rng, A.copy(), pi.copy(), pi_before.copy()
        self.touched, self.steps = touched.copy(), steps
        self._counted = (A != self.A0).any(axis=(1, 2))


def _times(A: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """\\(T(A) \\pi\\) for counts `A` `(n, 3, 3)` and distributions `pi` `(n, 3)`, without forming `T`: `(n, 3)`."""
    return np.einsum("nij,nj->ni", A, pi / A.sum(axis=1))


def _transitions(A: np.ndarray) -> np.ndarray:
    """\\(T = A / \\mathbf{1}^T A\\): the expected transition matrices of counts `A` `(n, 3, 3)`, columns summing to
    1."""
    return A / A.sum(axis=1, keepdims=True)


def _powers(T: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """\\(T^r\\) for each `r` of `exponents` `(u,)`, by repeated squaring of `T` `(3, 3)`: `(u, 3, 3)`."""
    result = np.broadcast_to(np.eye(3), (exponents.size, 3, 3)).copy()
    power = exponents.copy()
    while power.size and power.max() > 0:
        odd = power % 2 == 1
        result[odd] = result[odd] @ T
        T, power = T @ T, power // 2
    return result


def _normalized(x: np.ndarray) -> np.ndarray:
    return x / x.sum(axis=1, keepdims=True)
