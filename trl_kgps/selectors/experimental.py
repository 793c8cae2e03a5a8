r"""
Not a supported API: the KGPS variants measured and left out of `KGPSConfig`, and the paper's ablations, as fields of
`ExperimentalConfig` (a `KGPSConfig` with more fields) that `ExperimentalSelector` (a `KGPSSelector` with more paths)
runs. The benchmarks' named variants (`demo/variants.py`) and the paper's ablation table use them. The library never
imports this module: importing it registers `ExperimentalSelector` as `"kgps_experimental"` (`register_selector`), so
that `build_selector` and `KGPSCallback` build it for an `ExperimentalConfig` and a state it saved loads. Every
result for these variants is in benchmarks/RECORD.md: none beat the default.
"""

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import MAX_LOGIT_VARIANCE, SEE_PRESETS, KGPSConfig, is_integer, is_real, refusal
from ._checks import as_delta_norms
from ._draw import CandidatePass, draw
from ._utility import expected_mixed_group_probability, mixed_group_probability
from .kgps import KGPSSelector
from .per_prompt import PerPromptFilter
from .registry import register_selector
from .rule import SelectionRule
from .shared_filter import SharedFilter, adapted_prior


OBJECTIVES = ("mixed", "variance")
UTILITIES = ("posterior", "point")
# `selection` of a plain KGPSConfig, and Thompson sampling.
SELECTIONS = ("sample", "top", "thompson")


@dataclass
class ExperimentalConfig(KGPSConfig):
    r"""
    `KGPSConfig` and, for the benchmarks, the variants measured and left out and the paper's ablations: a prompt scored
    by the chance that its group is mixed (`objective="mixed"`), candidates dealt from passes over the pool
    (`candidate_pass`), the batch dealt as a stride scheduler deals time (`dealt`), a prompt kept out of the draw for a
    share of an epoch after it is drawn (`cooldown`), the pool's mean surprise added to every prompt (`shared_drift`),
    the residuals' drift capped at their prior (`residual_cap`) or their prior learnt per group
    (`residual_prior_by_group`), prompts solved in every rollout of their last groups no longer drawn (`retire_after`),
    Thompson sampling
    (`selection="thompson"`); the ablations \\(Q = \gamma \lVert\Delta\theta\rVert^2\\) (`process_noise_power=2`), a
    fixed \\(Q\\) (`fixed_process_noise`) and the utility at the mean (`utility="point"`).
    `ExperimentalConfig.paper(utility="point")` is the paper's point-estimate ablation.
    """

    selection: str = field(
        default="sample",
        metadata={
            "help": "How a batch is chosen from the scored candidates: 'sample' draws without replacement in "
            "proportion to the scores; 'top' takes the best (the paper); 'thompson' draws one logit per candidate "
            "from its belief and takes the best scores of those draws.",
            "choices": list(SELECTIONS),
        },
    )

    objective: str = field(
        default="variance",
        metadata={
            "help": "What a prompt's score is the posterior expectation of: 'variance' is the paper's p(1 - p); "
            "'mixed' is the probability 1 - p^k - (1-p)^k that a group of k rollouts is mixed (GRPO learns only "
            "from those).",
            "choices": list(OBJECTIVES),
        },
    )
    group_size: int | None = field(
        default=None,
        metadata={
            "help": "k in the 'mixed' objective. Unset: the rollouts per prompt of the latest observation "
            "(TRL's num_generations), 8 before the first.",
        },
    )
    candidate_pass: bool = field(
        default=False,
        metadata={
            "help": "Deal the candidates from seeded passes over the dataset, so that every prompt is a candidate "
            "once a pass (coverage), instead of drawing them at random each round."
        },
    )
    shared_drift: float = field(
        default=0.0,
        metadata={
            "help": "Share of each batch's mean surprise (posterior minus prior logit mean, averaged over its "
            "prompts) added to every prompt's mean, so that prompts not seen for a while follow the policy's "
            "overall progress. 0 is off (the paper).",
        },
    )
    process_noise_power: float = field(
        default=1.0,
        metadata={
            "help": "Power p of the parameter-update norm in Q = gamma * ||dtheta||^p. 1 is the method section and "
            "Algorithm 1; 2 is the ablation table's gamma * ||dtheta||^2.",
        },
    )
    fixed_process_noise: float | None = field(
        default=None,
        metadata={
            "help": "If set, Q takes this constant value every round, whatever the policy update was: the paper's "
            "'fixed Q' ablation. Leave unset for the update-coupled Q.",
        },
    )
    residual_cap: bool = field(
        default=False,
        metadata={
            "help": "With shared_variance > 0: cap each prompt's residual variance at the residual prior tau^2, so "
            "that the drift widens a prompt's own belief up to that of a prompt not yet seen and no further (the "
            "shared part carries the rest of it). False lets it grow by (1 - shared_noise_share) Q every round.",
        },
    )
    residual_prior_by_group: bool = field(
        default=False,
        metadata={
            "help": "With shared_variance > 0: learn the residual prior tau^2 per group of prompts that share a "
            "feature row (a level), each from its own prompts' first outcomes, instead of one for the pool.",
        },
    )
    dealt: bool = field(
        default=False,
        metadata={
            "help": "Deal each batch in proportion to the scores as a stride scheduler deals time, instead of drawing "
            "it afresh: every round each prompt accrues its share of the batch, and the prompts due soonest (whose "
            "credit reaches a whole place first) are chosen and pay one each, so a prompt comes back at regular "
            "intervals. Under equal scores this is an epoch walk (every prompt once every N / B rounds), as TRL's "
            "sampler and an offline filter walk their prompts. Needs selection='sample' with candidates=0.",
        },
    )
    cooldown: float = field(
        default=0.0,
        metadata={
            "help": "Keep a prompt out of the draw for round(cooldown * N / B) rounds after it is drawn, so that a "
            "prompt does not come back within a share of an epoch of its last draw (an epoch walk's spacing, without "
            "its order). 0 is off; at most 0.5, so that at least half the pool stays in the draw.",
        },
    )
    retire_after: int = field(
        default=0,
        metadata={
            "help": "Stop drawing a prompt once its last retire_after groups were all successes (its score becomes 0, "
            "so it is drawn only when no other prompt is left), as an offline filter drops the prompts a model "
            "always solves, but from the rollouts of the run. 0 is off.",
        },
    )
    utility: str = field(
        default="posterior",
        metadata={
            "help": "How a prompt is scored: 'posterior' is the posterior expectation of p(1-p) (the paper's "
            "method); 'point' scores the posterior mean only, p(1-p) at p = sigmoid(m) (the paper's 'point "
            "estimate' ablation).",
            "choices": list(UTILITIES),
        },
    )

    def _check_fields(self) -> None:
        super()._check_fields()
        if self.objective not in OBJECTIVES:
            raise refusal("objective", self.objective, f"be one of {OBJECTIVES}", SEE_PRESETS)
        if self.group_size is not None and not (is_integer(self.group_size) and self.group_size >= 1):
            raise refusal("group_size", self.group_size, "be an integer >= 1", "use TRL's num_generations, or None")
        if not (is_real(self.shared_drift) and self.shared_drift >= 0):
            raise refusal(
                "shared_drift", self.shared_drift, "be a finite number >= 0.0", "use 0 (off) or a share such as 0.1"
            )
        if not (is_real(self.process_noise_power) and self.process_noise_power > 0):
            raise refusal(
                "process_noise_power",
                self.process_noise_power,
                "be a finite number > 0.0",
                "use 1 (the paper's method) or 2 (its ablation table)",
            )
        Q = self.fixed_process_noise
        if Q is not None and not (is_real(Q) and 0 <= Q <= MAX_LOGIT_VARIANCE):
            raise refusal(
                "fixed_process_noise",
                Q,
                f"be a finite number >= 0.0 and <= {MAX_LOGIT_VARIANCE:g}",
                "use a non-negative logit variance per round, or None for the update-coupled Q",
            )
        if not (is_real(self.cooldown) and 0 <= self.cooldown <= 0.5):
            raise refusal("cooldown", self.cooldown, "be a number in [0, 0.5]", "use 0 (off) or a share such as 0.25")
        if not (is_integer(self.retire_after) and self.retire_after >= 0):
            raise refusal("retire_after", self.retire_after, "be an integer >= 0", "use 0 (off) or a number of groups")
        for name in ("residual_cap", "residual_prior_by_group", "dealt"):
            if not isinstance(getattr(self, name), bool):
                raise refusal(name, getattr(self, name), "be True or False", "use True or False")
        if self.utility not in UTILITIES:
            raise refusal(
                "utility",
                self.utility,
                f"be one of {UTILITIES}",
                "Use 'posterior' (the paper's method) or 'point' (its point-estimate ablation)",
            )

    def __post_init__(self):
        super().__post_init__()
        if self.shared_variance != 0 and self.shared_drift > 0:
            shared = "> 0" if self.shared_variance is not None else "unset (1.0 wherever the dataset has metadata)"
            raise ValueError(
                f"shared_variance {shared} (a factor shared across prompts) works with shared_drift=0, got "
                f"shared_drift={self.shared_drift!r}: the shared factor already carries the pool's common drift. Set "
                "shared_variance=0 for it."
            )
        if self.dealt and (self.selection != "sample" or self.candidates != 0):
            raise ValueError(
                f"dealt=True deals the whole pool in proportion to the scores, as selection='sample' with "
                f"candidates=0 draws it; got selection={self.selection!r}, candidates={self.candidates!r}. Use those, "
                "or dealt=False."
            )
        for name in ("residual_cap", "residual_prior_by_group"):
            if self.shared_variance == 0 and getattr(self, name):
                raise ValueError(
                    f"{name}=True acts on the residuals of the shared filter, but shared_variance=0 builds one filter "
                    f"per prompt, which has none. Set shared_variance > 0 (or leave it unset) for it, or {name}=False."
                )


# The fields `ExperimentalConfig` adds, with their defaults: what a plain `KGPSConfig` runs with.
EXPERIMENTAL_DEFAULTS = {
    f.name: f.default for f in dataclasses.fields(ExperimentalConfig) if f.name not in KGPSConfig.__dataclass_fields__
}


def experimental(config: KGPSConfig) -> ExperimentalConfig:
    """`config` as an `ExperimentalConfig`: itself, or a plain `KGPSConfig` with every added field at its default."""
    if isinstance(config, ExperimentalConfig):
        return config
    return ExperimentalConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})


def deal(credit: np.ndarray, weight: np.ndarray, batch_size: int, excluded: np.ndarray) -> np.ndarray:
    r"""
    One round of a stride scheduler over `N` prompts: each accrues its share of the batch, \(c_i \mathrel{+}= a_i\)
    with \(a_i = \min(1, \lambda w_i)\) and \(\sum_i a_i = B\) (`batch_shares`); the `batch_size` due soonest,
    \((1 - c_i) / a_i\) rounds from now (earliest deadline first; ties in index order), none of `excluded`, are chosen
    and pay one each, so the credits' sum never changes. A prompt is chosen as often as it accrues, up to its credit,
    which stays within a few units, and at intervals of about \(1 / a_i\) rounds; from starting credits uniform in
    `[0, 1)` its first turn falls uniformly within its first interval. With equal weights and distinct starting
    credits, every prompt exactly once every `N / B` rounds, in the order of the starting credits, the same every
    epoch (an epoch walk).

    Args:
        credit (`np.ndarray` of shape `(N,)`, float64): each prompt's credit, updated in place.
        weight (`np.ndarray` of shape `(N,)`): each prompt's weight in the draw, `>= 0`.
        batch_size (`int`): `B`, at most `N` minus the excluded.
        excluded (`np.ndarray` of int): prompts that may not be chosen this round (they accrue all the same).

    Returns:
        `np.ndarray` of shape `(B,)`, int64: the prompts chosen.
    """
    share = batch_shares(np.asarray(weight, dtype=np.float64), batch_size)
    credit += share
    due = np.full(credit.size, np.finfo(np.float64).max)  # a prompt with no share comes last
    np.divide(1.0 - credit, share, out=due, where=share > 0)
    due[excluded] = np.inf
    chosen = np.argsort(due, kind="stable")[:batch_size]
    credit[chosen] -= 1.0
    return chosen


def batch_shares(weight: np.ndarray, batch_size: int) -> np.ndarray:
    r"""
    Each prompt's share of a batch of `B`, \(a_i = \min(1, \lambda w_i)\) with \(\lambda\) such that
    \(\sum_i a_i = B\) (no prompt can fill more than its one place in a batch); with fewer than `B` positive
    weights, those take one each and the rest of the batch is shared equally by the others. Shape `(N,)`, float64.
    """
    positive = weight > 0
    count = int(positive.sum())
    if count <= batch_size:
        rest = (batch_size - count) / max(weight.size - count, 1)
        return np.where(positive, 1.0, rest)
    share = batch_size * weight / weight.sum()
    if share.max() <= 1.0:
        return share
    w = np.sort(weight)[::-1]
    tail = np.cumsum(w[::-1])[::-1]  # tail[k] = sum of all but the k largest weights
    for k in range(batch_size):  # the k largest take a whole place each; lambda shares the rest by weight
        lam = (batch_size - k) / tail[k]
        if lam * w[k] <= 1.0:
            break
    return np.minimum(1.0, lam * weight)


class Cooldown:
    r"""
    Which of `N` prompts were drawn in the last \(c\) rounds, and so may not be drawn yet.

    Args:
        num_prompts (`int`): `N`.
        share (`float`): \(c = \operatorname{round}(\text{share} \cdot N / B)\) rounds for batches of `B`.
    """

    def __init__(self, num_prompts: int, share: float):
        self.share = share
        self.round = 0  # rounds drawn so far
        self.last = np.full(num_prompts, -(2**62), dtype=np.int64)  # the round each prompt was last drawn in

    def excluded(self, batch_size: int, excluded: np.ndarray) -> np.ndarray:
        r"""`excluded` (sorted, unique) and the prompts drawn in the last \(c\) rounds, the least recent let back
        first if fewer than `batch_size` prompts would be left: sorted, unique, int64."""
        N = self.last.size
        rounds = round(self.share * N / batch_size)
        cooling = np.flatnonzero(self.round - self.last <= rounds)
        room = max(N - batch_size - excluded.size, 0)  # how many more prompts may be kept out
        if cooling.size > room:
            cooling = cooling[np.argsort(-self.last[cooling], kind="stable")[:room]]
        return np.union1d(excluded, cooling).astype(np.int64)

    def drawn(self, chosen: np.ndarray) -> None:
        """Marks `chosen` as drawn this round and starts the next."""
        self.last[chosen] = self.round
        self.round += 1


class ExperimentalSharedFilter(SharedFilter):
    r"""
    `SharedFilter` with two variants. `by_group`: the residual prior learnt per group of prompts that share a feature
    row (a level), \\(\tau_g^2\\), each moved by its own prompts' first outcomes by the pool's rule
    (`shared_filter.adapted_prior`). `cap`: every residual variance capped at its prompt's prior,
    \\(P_i \leftarrow \min(P_i, \tau^2)\\), so the drift widens a prompt's own residual up to that of a prompt of its
    group not yet seen, no further; applied where a variance is read, so the prediction stays O(1), and only lowering
    variances, so a bound on the scores stays a bound.

    Args: as `SharedFilter`'s, and `cap`, `by_group` (`bool`).

    Attributes:
        group_extra (`np.ndarray` of shape `(C,)`, float64): \\(\tau_g^2 - P_0\\) per distinct feature row
            (`by_group`).
    """

    def __init__(self, *args, cap: bool = False, by_group: bool = False):
        super().__init__(*args)
        self.cap, self.by_group = cap, by_group
        self.group_extra = np.zeros(self.factor.design.num_cells)

    @property
    def residual_prior(self) -> float:
        r"""\\(\tau^2\\), or with `by_group` its mean over the prompts (what the metrics log)."""
        if not self.by_group:
            return super().residual_prior
        return float(np.mean(self.prior_of(np.arange(self.num_prompts))))

    def prior_of(self, indices: np.ndarray) -> np.ndarray:
        """The residual prior of each prompt of `indices` (shape `(n,)`): its group's with `by_group`."""
        if not self.by_group:
            return np.full(indices.size, super().residual_prior)
        return self.initial_variance + self.group_extra[self.factor.design.row_of[indices]]

    def residual_variance(self, indices: np.ndarray) -> np.ndarray:
        prior = self.prior_of(indices)
        if self.by_group:
            variance = self.P[indices].astype(np.float64) + self.c
            variance += (prior - self.initial_variance) * ~self.seen[indices]
        else:
            variance = super().residual_variance(indices)
        return np.minimum(variance, prior) if self.cap else variance

    def moments(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shared_mean, shared_variance = self.factor.moments(indices)
        return self.m[indices].astype(np.float64) + shared_mean, self.residual_variance(indices) + shared_variance

    @property
    def variance(self) -> np.ndarray:
        return self.moments(np.arange(self.num_prompts))[1].astype(np.float32)

    def adapt_residual_prior(self, first: np.ndarray, nis: np.ndarray) -> None:
        if not self.by_group:
            return super().adapt_residual_prior(first, nis)
        P0, groups = self.initial_variance, self.factor.design.row_of[first]
        for g in np.unique(groups):
            tau2 = adapted_prior(
                P0 + self.group_extra[g], float(np.mean(nis[groups == g])), P0, self.residual_adaptation
            )
            self.group_extra[g] = tau2 - P0

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "group_extra": self.group_extra.copy()}

    def restored(self, state: dict[str, Any]) -> "ExperimentalSharedFilter":
        restored = super().restored(state)
        cells = restored.factor.design.num_cells
        group_extra = np.asarray(state.get("group_extra", np.zeros(cells)), dtype=np.float64)
        if group_extra.shape != (cells,) or not np.isfinite(group_extra).all():
            raise ValueError(f"state['group_extra'] is not one finite value per group ({cells}); it is corrupted.")
        restored.cap, restored.by_group, restored.group_extra = self.cap, self.by_group, group_extra.copy()
        return restored


# The group size of the 'mixed' objective before the first observation.
_DEFAULT_GROUP_SIZE = 8


class ExperimentalRule(SelectionRule):
    r"""
    `SelectionRule` with the variants of `ExperimentalConfig` that choose otherwise: Thompson sampling, candidates
    dealt from passes over the pool, the dealt draw, the cooldown, the 'mixed' objective, the utility at the mean and
    the retirement of prompts always solved (`retire_after`). For a plain `KGPSConfig` it chooses as `SelectionRule`,
    bit for bit. It keeps the candidate pass, the group size last seen and, with `retire_after`, each prompt's groups
    in a row all solved, with `dealt` each prompt's credit, with `cooldown` the round each prompt was last drawn in.

    Args: as `SelectionRule`'s; `config` an `ExperimentalConfig`.
    """

    def __init__(self, beliefs, config: ExperimentalConfig, num_prompts: int, row_weight: np.ndarray | None = None):
        super().__init__(beliefs, config, num_prompts, row_weight)
        self.candidate_pass = CandidatePass(num_prompts)
        self.group_size_seen = _DEFAULT_GROUP_SIZE  # k of the latest observation
        self.solved_streak = np.zeros(num_prompts, dtype=np.int64)  # each prompt's last groups all successes (retire)
        self.credit: np.ndarray | None = None  # each prompt's credit in the deal (`dealt`), drawn on the first round
        self.cooldown = Cooldown(num_prompts, config.cooldown) if config.cooldown else None

    @property
    def points(self) -> int | None:
        return self.config.quadrature_points if self.config.utility == "posterior" else None

    @property
    def ranks(self) -> bool:
        config = self.config
        return (
            super().ranks and config.objective == "variance" and config.shared_drift == 0 and not config.retire_after
        )

    @property
    def score_bound(self) -> float:
        return 0.25 if self.config.objective == "variance" else 1.0

    @property
    def group_size(self) -> int:
        """\\(k\\) of the 'mixed' objective: `config.group_size`, or the trials of the latest observation."""
        return self.config.group_size or self.group_size_seen

    def score(self, indices: np.ndarray) -> np.ndarray:
        if self.config.objective == "variance":
            score = super().score(indices)
        else:
            m, P = self.beliefs.utility_moments(indices)
            score = expected_mixed_group_probability(m, P, self.group_size, self.points)
        return self.unless_retired(indices, score)

    def unless_retired(self, indices: np.ndarray, score: np.ndarray) -> np.ndarray:
        """`score` (shape `(n,)`), 0 for the prompts of `indices` retired (`retire_after`)."""
        if not self.config.retire_after:
            return score
        return np.where(self.solved_streak[indices] >= self.config.retire_after, 0.0, score)

    def thompson_score(self, indices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        r"""The objective at one draw \\(\tilde\psi_i \sim \mathcal{N}(m_i, P_i)\\) per prompt, from `rng`."""
        m, P = self.beliefs.moments(indices)
        psi = m + np.sqrt(np.maximum(P, 0.0)) * rng.standard_normal(indices.size)
        if self.config.objective == "variance":
            return self.unless_retired(indices, 1.0 / (2.0 + 2.0 * np.cosh(psi)))
        return self.unless_retired(indices, mixed_group_probability(psi, self.group_size))

    def choose(self, batch_size: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if self.cooldown is None:
            return self._choose(batch_size, excluded, rng)
        chosen = self._choose(batch_size, self.cooldown.excluded(batch_size, excluded), rng)
        self.cooldown.drawn(chosen)
        return chosen

    def _choose(self, batch_size: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        config = self.config
        if config.dealt:
            return self.dealt(batch_size, excluded, rng)
        if config.candidates > 0 and config.candidate_pass:
            pool = self.candidate_pass.next(math.ceil(config.candidates * batch_size), excluded, rng)
        elif config.selection == "thompson":
            pool = self.candidates(batch_size, excluded, rng)
        else:
            return super().choose(batch_size, excluded, rng)
        if config.selection == "thompson":
            return draw(pool, self.thompson_score(pool, rng), batch_size, "top", rng)
        return draw(pool, self.score(pool), batch_size, config.selection, rng, config.selection_temperature)

    def dealt(self, batch_size: int, excluded: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """`deal` over the whole pool, each prompt weighed as `selection="sample"` draws it (its score, times its rows'
        weight with `copies_weight="rows"`, to the power `1 / T`); the starting credits uniform in `[0, 1)` from
        `rng`."""
        if self.credit is None:
            self.credit = rng.random(self.num_prompts)
        score = self.scores().astype(np.float64)
        if self.row_weight is not None:
            score = score * self.row_weight
        return deal(self.credit, score ** (1.0 / self.config.selection_temperature), batch_size, excluded)

    def observed(self, indices: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> None:
        """Keeps the group size seen and, with `retire_after`, each prompt's groups in a row all successes."""
        self.group_size_seen = int(trials.max())
        if self.config.retire_after:
            solved = successes == trials
            self.solved_streak[indices] = np.where(solved, self.solved_streak[indices] + 1, 0)

    def state_dict(self) -> dict[str, Any]:
        state = {**self.candidate_pass.state_dict(), "group_size_seen": self.group_size_seen}
        if self.config.retire_after:
            state["solved_streak"] = self.solved_streak.copy()
        if self.config.dealt and self.credit is not None:
            state["deal_credit"] = self.credit.copy()
        if self.cooldown is not None:
            state["cooldown_last"], state["cooldown_round"] = self.cooldown.last.copy(), self.cooldown.round
        return state

    def restored(self, state: dict[str, Any], beliefs) -> "ExperimentalRule":
        """`SelectionRule.restored`, with what this rule keeps (the pass, the group size, the streaks, the credits, the
        cooldown), each checked first."""
        group_size_seen = int(state["group_size_seen"])
        if group_size_seen < 1:
            raise ValueError(
                f"state['group_size_seen']={group_size_seen} is not a number of rollouts; it is corrupted."
            )
        candidate_pass = CandidatePass(self.num_prompts)
        candidate_pass.load_state_dict(state)
        streak = np.asarray(state.get("solved_streak", np.zeros(self.num_prompts, dtype=np.int64)))
        if streak.shape != (self.num_prompts,) or streak.dtype.kind not in "iu" or (streak < 0).any():
            raise ValueError(
                f"state['solved_streak'] is not a count per prompt ({self.num_prompts}); it is corrupted."
            )
        credit = state.get("deal_credit")
        if credit is not None:
            credit = np.asarray(credit)
            if credit.shape != (self.num_prompts,) or credit.dtype.kind != "f" or not np.isfinite(credit).all():
                raise ValueError(
                    f"state['deal_credit'] is not a finite credit per prompt ({self.num_prompts}); it is corrupted."
                )
        last = state.get("cooldown_last")
        if last is not None:
            last, round_ = np.asarray(last), int(state["cooldown_round"])
            if last.shape != (self.num_prompts,) or last.dtype.kind not in "iu" or (last >= round_).any():
                raise ValueError(
                    f"state['cooldown_last'] is not a past round per prompt ({self.num_prompts}); it is corrupted."
                )
        rule = super().restored(state, beliefs)
        rule.candidate_pass, rule.group_size_seen, rule.solved_streak = candidate_pass, group_size_seen, streak.copy()
        rule.credit = None if credit is None else credit.astype(np.float64)
        if rule.cooldown is not None and last is not None:
            rule.cooldown.last, rule.cooldown.round = last.astype(np.int64), round_
        return rule


class ExperimentalSelector(KGPSSelector):
    r"""
    `KGPSSelector` with the variants of `ExperimentalConfig`, through its extension point: Thompson sampling,
    candidates dealt from passes over the pool, the 'mixed' objective, the utility at the mean and the retirement of
    prompts always solved (`ExperimentalRule`), the pool's mean surprise added to every prompt (`shared_drift`,
    per-prompt filter only), the residuals' drift capped at their prior and their prior learnt per group
    (`ExperimentalSharedFilter`, shared filter only), and the ablations of \\(Q = \gamma \lVert\Delta\theta\rVert^p\\)
    and a fixed \\(Q\\). For a plain `KGPSConfig` it runs as a `KGPSSelector`, bit for bit. Its state adds the
    candidate pass, the group size last seen, and what a variant keeps: each group's prior, each prompt's groups in a
    row solved.

    Args: as `KGPSSelector`'s; `config` an `ExperimentalConfig` (a `KGPSConfig` is read with every added field at its
    default).
    """

    config_class = ExperimentalConfig
    rule_class = ExperimentalRule

    def __init__(
        self,
        num_prompts: int,
        config: KGPSConfig | None = None,
        seed: int = 0,
        features: Any = None,
        rows_per_prompt: Any = None,
    ):
        if config is not None and not isinstance(config, KGPSConfig):
            raise TypeError(f"config must be a KGPSConfig, got {type(config).__name__}.")
        super().__init__(num_prompts, experimental(config or ExperimentalConfig()), seed, features, rows_per_prompt)

    def new_filter(self, features):
        if self.config.shared_variance > 0:
            shared = super().new_filter(features)
            cap, by_group = self.config.residual_cap, self.config.residual_prior_by_group
            if not (cap or by_group):
                return shared
            arguments = (
                shared.shared_variance,
                shared.initial_variance,
                shared.noise_share,
                shared.residual_adaptation,
            )
            return ExperimentalSharedFilter(shared.factor.design, *arguments, cap=cap, by_group=by_group)
        config = self.config
        return PerPromptFilter(self.num_prompts, config.initial_variance, config.observation, config.shared_drift)

    def process_noise(self, delta_norm) -> float:
        r"""
        \\(Q\\) for the given update norm(s): `fixed_process_noise` if set, else
        \\(\gamma \sum_s \lVert \Delta\theta_s \rVert^p\\), gamma calibrated as `KGPSSelector.gamma` says.
        """
        norms = as_delta_norms(delta_norm)
        if self.config.fixed_process_noise is not None:
            return float(self.config.fixed_process_noise)
        return float(self.gamma * np.sum(norms**self.config.process_noise_power))

    @property
    def group_size(self) -> int:
        """\\(k\\) of the 'mixed' objective: `config.group_size`, or the trials of the latest observation."""
        return self._rule.group_size


register_selector("kgps_experimental", ExperimentalSelector)
