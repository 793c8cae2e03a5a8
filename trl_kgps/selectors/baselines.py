"""
The paper's baselines behind `KGPSSelector`'s interface: `UniformSelector`, `MoPPSSelector`, `GRESOSelector`.

Each is built as `Name(num_prompts, ..., seed=0)` and offers `select`, `initialize`, `update`, `predict`,
`predicted_success` and `state_dict` / `load_state_dict`, so the sampler and the callback use them unchanged. Every
method checks its input before it changes any state, as `KGPSSelector`'s do. A saved one comes back with
`from_pretrained`, e.g. `MoPPSSelector.from_pretrained(output_dir_or_repo_id)`.

`MoPPSSelector` and `GRESOSelector` default to what their authors run (thu-rllab/MoPPS `recipe/ours/mopps.py` and its
MATH scripts; Infini-AI-Lab/GRESO `verl/trainer/ppo/ray_trainer.py`). A state records the hyperparameters it was
saved with and continues with them: a hyperparameter or a rule added later takes, for a state that lacks it, the value
that reproduces what the saving release did.
"""

import logging
import math
from typing import Any

import numpy as np

from ..engine import older_states
from ._checks import as_batch_size, as_delta_norms, as_index_array, as_num_prompts, as_observations
from .base import FromPretrainedMixin


logger = logging.getLogger(__name__)


class _Selector(FromPretrainedMixin):
    """
    What the baselines share: the prompt count, the seeded generator, input checks and the state envelope, which
    also records the seed and the constructor's `hyperparameters` so that `from_state_dict` can rebuild the selector.
    """

    name = ""
    hyperparameters: tuple[str, ...] = ()  # the constructor's keyword arguments besides num_prompts and seed

    def __init__(self, num_prompts: int, seed: int = 0):
        self.num_prompts = as_num_prompts(num_prompts)
        self.seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))

    def _excluded(self, batch_size, exclude) -> tuple[int, np.ndarray]:
        excluded = np.unique(as_index_array("exclude", [] if exclude is None else exclude, self.num_prompts))
        return as_batch_size(batch_size, self.num_prompts - excluded.size), excluded

    def initialize(self, indices, successes, trials) -> None:
        """Baselines have no separate warmup estimate: a first observation is an observation."""
        self.update(indices, successes, trials)

    def predict(self, delta_norm) -> None:
        """Baselines ignore the policy's update; the norm is only checked."""
        as_delta_norms(delta_norm)

    def _envelope(self, **state) -> dict[str, Any]:
        return {
            "selector": self.name,
            "num_prompts": self.num_prompts,
            "rng_state": self._rng.bit_generator.state,
            "seed": self.seed,
            "hyperparameters": {name: getattr(self, name) for name in self.hyperparameters},
            **state,
        }

    @classmethod
    def init_arguments(cls, state: dict[str, Any]) -> dict[str, Any]:
        return {
            "num_prompts": state["num_prompts"],
            "seed": state["seed"],
            **older_states.ADDED_HYPERPARAMETERS.get(cls.name, {}),
            **state["hyperparameters"],
        }

    def _saved_hyperparameters(self, state: dict[str, Any]) -> dict[str, Any]:
        """
        The hyperparameters `state` was saved with, checked by the constructor (one it lacks: the value of the
        release that saved it). A state that records none (`older_states`) keeps this
        selector's, but for those added since, which take the value of the release that saved it.
        """
        saved = state.get("hyperparameters") if isinstance(state, dict) else None
        added = older_states.ADDED_HYPERPARAMETERS.get(self.name, {})
        if saved is None:
            return {**{name: getattr(self, name) for name in self.hyperparameters}, **added}
        if not isinstance(saved, dict) or not set(saved) <= set(self.hyperparameters):
            raise ValueError(
                f"state['hyperparameters'] is {saved!r}, not those of a {type(self).__name__} "
                f"({', '.join(self.hyperparameters)}); it is corrupted."
            )
        try:
            # a one-prompt selector checks the values as the constructor does, at no cost
            built = type(self)(1, **{**added, **saved})
        except TypeError as error:
            raise ValueError(f"state['hyperparameters'] do not build a {type(self).__name__}: {error}.") from None
        return {name: getattr(built, name) for name in self.hyperparameters}

    def _adopt(self, hyperparameters: dict[str, Any]) -> None:
        """Continues with a loaded state's `hyperparameters` (saying so where they differ from this selector's)."""
        changed = {name: value for name, value in hyperparameters.items() if getattr(self, name) != value}
        if changed:
            logger.warning(
                "%s continues with the hyperparameters its state was saved with: %s.",
                type(self).__name__,
                ", ".join(f"{name}={value!r} (was {getattr(self, name)!r})" for name, value in changed.items()),
            )
        for name, value in hyperparameters.items():
            setattr(self, name, value)

    def _open(self, state: dict[str, Any], arrays: dict[str, tuple[tuple[int, ...], str]]) -> np.random.Generator:
        """Checks a state's envelope and arrays (name -> (shape, dtype kind)); returns its generator."""
        if not isinstance(state, dict) or state.get("selector") != self.name:
            raise ValueError(f"state was not written by {type(self).__name__}.state_dict().")
        if state.get("num_prompts") != self.num_prompts:
            raise ValueError(
                f"state is for {state.get('num_prompts')!r} prompts, but this selector has {self.num_prompts}. Load a "
                "state saved for the same dataset."
            )
        for key, (shape, kind) in arrays.items():
            value = np.asarray(state.get(key))
            if value.shape != shape or value.dtype.kind != kind:
                raise ValueError(f"state[{key!r}] has shape {value.shape} and dtype {value.dtype}; it is corrupted.")
        rng = np.random.Generator(np.random.PCG64())
        try:
            rng.bit_generator.state = state["rng_state"]
        except (TypeError, ValueError, KeyError) as error:
            raise ValueError(f"state['rng_state'] is not a PCG64 generator state ({error}).") from None
        return rng


class _Epochs(_Selector):
    """
    A seeded walk through epochs of random permutations, each prompt once an epoch (TRL's default order). A prompt
    excluded when its turn comes waits for a later draw of the same epoch (or, if the epoch ends first, its turn in
    the next).
    """

    def __init__(self, num_prompts: int, seed: int = 0):
        super().__init__(num_prompts, seed)
        self._order = self._rng.permutation(self.num_prompts)
        self._position = 0

    def _walk(self, count: int, excluded: np.ndarray) -> np.ndarray:
        """The next `count` distinct prompts of the walk not in `excluded` (at least `count` must be allowed)."""
        chosen = np.empty(0, dtype=np.int64)
        while chosen.size < count:
            if self._position == self.num_prompts:
                self._order, self._position = self._rng.permutation(self.num_prompts), 0
            # only the head of the epoch can be taken: the next `count` prompts, and one more per prompt not allowed
            rest = self._order[self._position : self._position + count + excluded.size + chosen.size]
            free = rest[~np.isin(rest, excluded) & ~np.isin(rest, chosen)] if excluded.size or chosen.size else rest
            take = free[: count - chosen.size]
            if free.size < rest.size:
                # e.g. rest [5, 2, 7, 1], 5 excluded, take [2, 7] -> [2, 7, 5, 1]: the taken leave the epoch, 5 waits
                self._order[self._position : self._position + rest.size] = np.concatenate(
                    [take, rest[~np.isin(rest, take)]]
                )
            self._position += take.size
            chosen = np.concatenate([chosen, take])
            if chosen.size < count:  # this epoch has no more allowed prompts: the next one starts
                self._position = self.num_prompts
        return chosen

    def _walk_state(self) -> dict[str, Any]:
        return {"order": self._order.copy(), "position": self._position}

    def _load_walk(self, state: dict[str, Any]) -> None:
        n = self.num_prompts
        if not 0 <= int(state["position"]) <= n or np.sort(state["order"]).tolist() != list(range(n)):
            raise ValueError("state['order'] is not a permutation of the prompts; it is corrupted.")
        self._order, self._position = np.asarray(state["order"]).copy(), int(state["position"])


class UniformSelector(_Epochs):
    """
    TRL's default order: epochs of seeded random permutations, each prompt once an epoch. A prompt excluded when its
    turn comes waits for a later batch of the same epoch (or, if the epoch ends first, its turn in the next). Its
    `predicted_success` is each prompt's last observed success rate (1/2 before any), the naive predictor the
    estimation metrics compare against.
    """

    name = "uniform"

    def __init__(self, num_prompts: int, seed: int = 0):
        super().__init__(num_prompts, seed)
        self._last = np.full(self.num_prompts, 0.5)

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        batch_size, excluded = self._excluded(batch_size, exclude)
        return self._walk(batch_size, excluded)

    def update(self, indices, successes, trials) -> None:
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        self._last[idx] = s / k

    def predicted_success(self, indices=None) -> np.ndarray:
        return (
            self._last.copy() if indices is None else self._last[as_index_array("indices", indices, self.num_prompts)]
        )

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(**self._walk_state(), last=self._last.copy())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = self.num_prompts
        rng = self._open(state, {"order": ((n,), "i"), "last": ((n,), "f")})
        self._load_walk(state)
        self._rng, self._last = rng, np.asarray(state["last"], dtype=np.float64).copy()


class MoPPSSelector(_Epochs):
    r"""
    MoPPS (Qu et al., 2025): a Beta posterior per prompt, Thompson sampling among candidates in epoch order.

    Each prompt starts at Beta(\\(\alpha_0, \beta_0\\)) = Beta(1, 1). An observation of `s` successes in `k` rollouts
    decays the counts toward the prior and adds the new ones:

        alpha <- lambda alpha + (1 - lambda) alpha_0 + s,   beta <- lambda beta + (1 - lambda) beta_0 + (k - s)

    (`decay_to_prior=False` gives the plain `alpha <- lambda alpha + s`). A round takes the next
    `candidate_ratio * B` candidates of a seeded walk through epochs of random permutations (the authors' data loader,
    whose batch is `ts_ratio * B` prompts), samples a success rate for each from its posterior, and keeps the `B`
    closest to `target` (ties: the candidate met first). As with the authors' loader (`drop_last=True`), an epoch
    whose remaining prompts cannot fill a pool ends there, and a pool larger than the allowed prompts is all of them.
    A prompt excluded when its turn comes waits for a later pool of the same epoch.

    The defaults are the authors' MATH recipe (`recipe/ours/scripts/math/*_topk_noinit.sh`): 16 candidates per
    selected prompt, no decay (`bandit_decay_ratio` 1.0), prior Beta(1, 1), target 0.5. `recipe="countdown"` or
    `recipe="geometry3k"` gives their Countdown and Geometry3K recipes (8 candidates per selected prompt, decay 0.5);
    `decay` and `candidate_ratio` passed explicitly override the recipe's (`RECIPES` lists them).

    Args:
        num_prompts (`int`): the pool size.
        decay (`float`, *optional*): \\(\lambda\\) in `[0, 1]`; the recipe's if omitted (1: every count kept).
        candidate_ratio (`float`, *optional*): candidates per selected prompt, `>= 1` (`float("inf")`: every allowed
            prompt); the recipe's if omitted.
        target (`float`, *optional*, defaults to `0.5`): the success rate sought (the authors' `bandit_target_mean`).
        decay_to_prior (`bool`, *optional*, defaults to `True`): decay toward Beta(1, 1), as the authors' code does.
        pool (`str`, *optional*, defaults to `"epoch"`): `"epoch"`, candidates in epoch order as above; `"uniform"`, a
            fresh uniform draw of candidates each round (what trl-kgps did before this default; a saved state that
            records no `pool` continues with it).
        recipe (`str`, *optional*, defaults to `"math"`): `"math"`, `"countdown"` or `"geometry3k"`.
        seed (`int`, *optional*, defaults to `0`): seeds the epochs' order (or the uniform draws) and the Thompson
            samples.
    """

    name = "mopps"
    hyperparameters = ("decay", "candidate_ratio", "target", "decay_to_prior", "pool")
    # The authors' scripts (thu-rllab/MoPPS recipe/ours/scripts/*/*_topk_noinit.sh): `ts_ratio`, `bandit_decay_ratio`.
    RECIPES: dict[str, dict[str, float]] = {
        "math": {"decay": 1.0, "candidate_ratio": 16.0},
        "countdown": {"decay": 0.5, "candidate_ratio": 8.0},
        "geometry3k": {"decay": 0.5, "candidate_ratio": 8.0},
    }
    POOLS = ("epoch", "uniform")

    def __init__(
        self,
        num_prompts: int,
        decay: float | None = None,
        candidate_ratio: float | None = None,
        target: float = 0.5,
        decay_to_prior: bool = True,
        pool: str = "epoch",
        recipe: str = "math",
        seed: int = 0,
    ):
        if not isinstance(recipe, str) or recipe not in self.RECIPES:
            raise ValueError(f"recipe={recipe!r} is not one of {list(self.RECIPES)}; pass one of those.")
        decay = self.RECIPES[recipe]["decay"] if decay is None else decay
        candidate_ratio = self.RECIPES[recipe]["candidate_ratio"] if candidate_ratio is None else candidate_ratio
        for name, value, low, high in (("decay", decay, 0.0, 1.0), ("target", target, 0.0, 1.0)):
            if not (isinstance(value, (int, float)) and low <= value <= high):
                raise ValueError(f"{name} must lie in [{low}, {high}], got {value!r}.")
        if not (isinstance(candidate_ratio, (int, float)) and candidate_ratio >= 1):
            raise ValueError(
                f"candidate_ratio must be >= 1 (candidates per selected prompt), got {candidate_ratio!r}."
            )
        if not isinstance(decay_to_prior, (bool, np.bool_)):
            raise ValueError(f"decay_to_prior must be True or False, got {decay_to_prior!r}.")
        decay_to_prior = bool(decay_to_prior)
        if not isinstance(pool, str) or pool not in self.POOLS:
            raise ValueError(f"pool={pool!r} is not one of {list(self.POOLS)}; pass one of those.")
        super().__init__(num_prompts, seed)
        self.decay, self.candidate_ratio, self.target, self.decay_to_prior, self.pool = (
            decay,
            candidate_ratio,
            target,
            decay_to_prior,
            pool,
        )
        self.alpha = np.ones(self.num_prompts)
        self.beta = np.ones(self.num_prompts)

    def _candidates(self, size: int, excluded: np.ndarray) -> np.ndarray:
        """The round's `size` candidates, none in `excluded`, in the order their posteriors are sampled."""
        if self.pool == "uniform":
            allowed = np.setdiff1d(np.arange(self.num_prompts), excluded, assume_unique=True)
            return self._rng.choice(allowed, size=size, replace=False)
        rest = self.num_prompts - self._position
        if rest - excluded.size < size:
            left = rest - np.count_nonzero(np.isin(self._order[self._position :], excluded))
            if left < size:  # the loader drops an epoch's last, incomplete batch: a new epoch starts
                self._order, self._position = self._rng.permutation(self.num_prompts), 0
        return self._walk(size, excluded)

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        batch_size, excluded = self._excluded(batch_size, exclude)
        allowed, wanted = self.num_prompts - excluded.size, self.candidate_ratio * batch_size
        candidates = self._candidates(allowed if wanted >= allowed else math.ceil(wanted), excluded)
        sampled = self._rng.beta(self.alpha[candidates], self.beta[candidates])
        return candidates[np.argsort(np.abs(sampled - self.target), kind="stable")[:batch_size]]

    def update(self, indices, successes, trials) -> None:
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        keep = 1.0 - self.decay if self.decay_to_prior else 0.0
        self.alpha[idx] = self.decay * self.alpha[idx] + keep * 1.0 + s
        self.beta[idx] = self.decay * self.beta[idx] + keep * 1.0 + (k - s)

    def predicted_success(self, indices=None) -> np.ndarray:
        idx = slice(None) if indices is None else as_index_array("indices", indices, self.num_prompts)
        return self.alpha[idx] / (self.alpha[idx] + self.beta[idx])

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(**self._walk_state(), alpha=self.alpha.copy(), beta=self.beta.copy())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """
        Restores a `state_dict()`, with the hyperparameters it was saved with.
        """
        n = self.num_prompts
        if isinstance(state, dict):
            state = older_states.mopps_state(state, n)
        rng = self._open(state, {"alpha": ((n,), "f"), "beta": ((n,), "f"), "order": ((n,), "i")})
        alpha, beta = np.asarray(state["alpha"], dtype=np.float64), np.asarray(state["beta"], dtype=np.float64)
        if not (np.isfinite(alpha).all() and np.isfinite(beta).all() and (alpha > 0).all() and (beta > 0).all()):
            raise ValueError("state holds Beta parameters that are not finite and positive; it is corrupted.")
        hyperparameters = self._saved_hyperparameters(state)
        self._load_walk(state)  # checks before it changes anything
        self._adopt(hyperparameters)
        self._rng, self.alpha, self.beta = rng, alpha.copy(), beta.copy()


class GRESOSelector(_Selector):
    r"""
    GRESO (Zheng et al., 2025): skip prompts whose recent groups were all right or all wrong, before rollout.

    A round walks the prompts in a seeded random order (epoch after epoch). A prompt whose last `c` groups were all
    correct is skipped with probability \\(1 - \max(p_{easy}^c, 0.01)\\), all wrong likewise with `p_hard`; a
    prompt never observed, or whose last group was mixed, is always kept. A skipped prompt has had its turn this
    epoch; one excluded (or already chosen for this batch) when its turn comes waits for a later draw of the same
    epoch.

    After each observed batch, once the walk is past its first `adapt_after_epochs` epochs (the authors' `epoch > 0`),
    `p_easy` moves by `step` toward a share of all-correct groups of `target_zero_variance / 3` and `p_hard` toward a
    share of all-wrong groups of `2/3` of it: down when the batch's share is at or above its target (`>=`), up when
    below, clamped to `[0.05, 0.95]` (the authors' `min_p`, `max_p`). Both start at 0.5. This is the authors'
    `all_probabilistic` strategy (Infini-AI-Lab/GRESO `verl/trainer/ppo/ray_trainer.py`,
    `verl/trainer/ttis/presampling_selector.py`); a batch's shares are over its distinct observed prompts. The epoch
    is the walk's when `update` is called: the epoch the last batch was drawn in, where batches are chosen after the
    previous one is scored.

    Args:
        num_prompts (`int`): the pool size.
        target_zero_variance (`float`, *optional*, defaults to `0.25`): the share of zero-variance groups sought.
        step (`float`, *optional*, defaults to `0.01`): the adjustment of `p_easy`, `p_hard` per batch.
        adapt_after_epochs (`int`, *optional*, defaults to `1`): epochs of the walk before `p_easy`, `p_hard` adapt
            (a saved state that records none adapted from the start: 0).
        seed (`int`, *optional*, defaults to `0`): seeds the order and the skips.

    A state saved before these rules (no `rules` in it) continues with the rules it was saved under: `p` holds when a
    share equals its target, and an excluded prompt loses its turn in the epoch.
    """

    name = "greso"
    hyperparameters = ("target_zero_variance", "step", "adapt_after_epochs")
    EXPLORATION_FLOOR = 0.01
    P_RANGE = (0.05, 0.95)
    # 1: the authors' rules (`>=` moves p down; excluded prompts wait); 0: those of states saved without `rules`.
    RULES = 1

    def __init__(
        self,
        num_prompts: int,
        target_zero_variance: float = 0.25,
        step: float = 0.01,
        adapt_after_epochs: int = 1,
        seed: int = 0,
    ):
        if not (isinstance(target_zero_variance, (int, float)) and 0 <= target_zero_variance <= 1):
            raise ValueError(f"target_zero_variance must lie in [0, 1], got {target_zero_variance!r}.")
        if not (isinstance(step, (int, float)) and 0 <= step < math.inf):
            raise ValueError(
                f"step must be a finite number >= 0 (the change of p_easy, p_hard per batch), got {step!r}."
            )
        if isinstance(adapt_after_epochs, bool) or not (
            isinstance(adapt_after_epochs, (int, np.integer)) and adapt_after_epochs >= 0
        ):
            raise ValueError(f"adapt_after_epochs must be a whole number >= 0, got {adapt_after_epochs!r}.")
        super().__init__(num_prompts, seed)
        self.target_zero_variance, self.step, self.adapt_after_epochs = (
            target_zero_variance,
            step,
            int(adapt_after_epochs),
        )
        self.p_easy = self.p_hard = 0.5
        # streak > 0: the last `streak` groups were all correct; < 0: all wrong; 0: mixed, or never observed
        self.streak = np.zeros(self.num_prompts, dtype=np.int64)
        self.last_rate = np.full(self.num_prompts, 0.5)
        self._order = self._rng.permutation(self.num_prompts)
        self._position = 0
        self.epoch = 0  # the walk's epoch, 0 for the first
        self._rules = self.RULES

    def _keep_probability(self, indices: np.ndarray) -> np.ndarray:
        streak = self.streak[indices]
        easy = np.maximum(self.p_easy ** np.maximum(streak, 0), self.EXPLORATION_FLOOR)
        hard = np.maximum(self.p_hard ** np.maximum(-streak, 0), self.EXPLORATION_FLOOR)
        return np.where(streak > 0, easy, np.where(streak < 0, hard, 1.0))

    def _kept(self, index: int, visited: int) -> bool:
        """Whether the walk keeps `index`, its `visited`-th allowed prompt this round."""
        # after two full passes without filling the batch, keep whatever is allowed (all skipped otherwise)
        return visited > 2 * self.num_prompts or self._rng.uniform() < self._keep_probability(np.array([index]))[0]

    def _next_epoch(self) -> None:
        self._order, self._position = self._rng.permutation(self.num_prompts), 0
        self.epoch += 1

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        batch_size, excluded = self._excluded(batch_size, exclude)
        if self._rules == 0:
            return self._select_before_rules(batch_size, excluded)
        chosen: list[int] = []
        blocked = set(excluded.tolist())
        visited = 0
        n = self.num_prompts
        while len(chosen) < batch_size:
            if self._position == n:
                self._next_epoch()
            start = end = self._position
            met: list[int] = []  # allowed prompts met: kept or skipped, they have had their turn this epoch
            waiting: list[int] = []  # prompts not allowed in this batch: they keep their turn
            while end < n and len(chosen) < batch_size:
                index = int(self._order[end])
                end += 1
                if index in blocked:
                    waiting.append(index)
                    continue
                met.append(index)
                visited += 1
                if self._kept(index, visited):
                    chosen.append(index)
                    blocked.add(index)
            # e.g. [5, 2, 7] met from position 0, 5 excluded, 2 and 7 skipped or kept -> [2, 7, 5], position 2
            self._order[start:end] = met + waiting
            self._position = start + len(met) if len(chosen) == batch_size else n
        return np.asarray(chosen, dtype=np.int64)

    def _select_before_rules(self, batch_size: int, excluded: np.ndarray) -> np.ndarray:
        """The walk of states saved without `rules`: an excluded prompt met loses its turn in the epoch."""
        chosen: list[int] = []
        visited = 0
        while len(chosen) < batch_size:
            if self._position == self.num_prompts:
                self._next_epoch()
            index = int(self._order[self._position])
            self._position += 1
            visited += 1
            if index in chosen or np.isin(index, excluded):
                continue
            if self._kept(index, visited):
                chosen.append(index)
        return np.asarray(chosen, dtype=np.int64)

    def update(self, indices, successes, trials) -> None:
        idx, s, k = as_observations(indices, successes, trials, self.num_prompts)
        if not idx.size:
            return
        easy, hard = s == k, s == 0
        self.streak[idx] = np.where(
            easy, np.maximum(self.streak[idx], 0) + 1, np.where(hard, np.minimum(self.streak[idx], 0) - 1, 0)
        )
        self.last_rate[idx] = s / k
        if self.epoch < self.adapt_after_epochs:
            return
        low, high = self.P_RANGE
        for attribute, share, target in (
            ("p_easy", easy.mean(), self.target_zero_variance / 3),
            ("p_hard", hard.mean(), 2 * self.target_zero_variance / 3),
        ):
            p = getattr(self, attribute)
            if self._rules == 0:
                p += self.step if share < target else -self.step if share > target else 0
            else:
                p = p - self.step if share >= target else p + self.step
            setattr(self, attribute, min(max(p, low), high))

    def predicted_success(self, indices=None) -> np.ndarray:
        rates = self.last_rate
        return rates.copy() if indices is None else rates[as_index_array("indices", indices, self.num_prompts)]

    def state_dict(self) -> dict[str, Any]:
        return self._envelope(
            streak=self.streak.copy(),
            last_rate=self.last_rate.copy(),
            order=self._order.copy(),
            position=self._position,
            p_easy=self.p_easy,
            p_hard=self.p_hard,
            epoch=self.epoch,
            rules=self._rules,
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """
        Restores a `state_dict()`, with the hyperparameters and rules it was saved with.
        """
        n = self.num_prompts
        rng = self._open(state, {"streak": ((n,), "i"), "last_rate": ((n,), "f"), "order": ((n,), "i")})
        p_easy, p_hard = float(state["p_easy"]), float(state["p_hard"])
        low, high = self.P_RANGE
        if not (low <= p_easy <= high and low <= p_hard <= high and 0 <= int(state["position"]) <= n):
            raise ValueError("state holds p_easy, p_hard or a position out of range; it is corrupted.")
        if np.sort(state["order"]).tolist() != list(range(n)):
            raise ValueError("state['order'] is not a permutation of the prompts; it is corrupted.")
        state = {**older_states.GRESO_DEFAULTS, **state}
        epoch, rules = int(state["epoch"]), int(state["rules"])
        if epoch < 0 or rules not in (0, self.RULES):
            raise ValueError(f"state holds epoch {epoch} or rules {rules}; it is corrupted.")
        hyperparameters = self._saved_hyperparameters(state)
        self._adopt(hyperparameters)
        self._rng, self.p_easy, self.p_hard = rng, p_easy, p_hard
        self.streak = np.asarray(state["streak"], dtype=np.int64).copy()
        self.last_rate = np.asarray(state["last_rate"], dtype=np.float64).copy()
        self._order, self._position = np.asarray(state["order"]).copy(), int(state["position"])
        self.epoch, self._rules = epoch, rules
