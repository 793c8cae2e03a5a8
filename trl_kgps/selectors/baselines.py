"""
The paper's baselines behind `KGPSSelector`'s interface: `UniformSelector`, `MoPPSSelector`, `GRESOSelector`.

Each is built as `Name(num_prompts, ..., seed=0)` and offers `select`, `initialize`, `update`, `predict`,
`predicted_success` and `state_dict` / `load_state_dict`, so the sampler and the callback use them unchanged. Every
method checks its input before it changes any state, as `KGPSSelector`'s do. A saved one comes back with
`from_pretrained`, e.g. `MoPPSSelector.from_pretrained(output_dir_or_repo_id)`.
"""

import math
from typing import Any

import numpy as np

from ._checks import as_batch_size, as_delta_norms, as_index_array, as_num_prompts, as_observations
from .base import FromPretrainedMixin


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
    def _init_arguments(cls, state: dict[str, Any]) -> dict[str, Any]:
        return {"num_prompts": state["num_prompts"], "seed": state["seed"], **state["hyperparameters"]}

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


class MoPPSSelector(_Selector):
    r"""
    MoPPS (Qu et al., 2025): a Beta posterior per prompt, Thompson sampling from a uniform candidate pool.

    Each prompt starts at Beta(\\(\alpha_0, \beta_0\\)) = Beta(1, 1). An observation of `s` successes in `k` rollouts
    decays the counts and adds the new ones:

        alpha <- lambda alpha + (1 - lambda) alpha_0 + s,   beta <- lambda beta + (1 - lambda) beta_0 + (k - s)

    (the public implementation decays toward the prior; `decay_to_prior=False` gives the plain
    `alpha <- lambda alpha + s`). A round draws `candidate_ratio * B` candidates uniformly, samples a success rate
    for each from its posterior, and keeps the `B` closest to `target`.

    Args:
        num_prompts (`int`): the pool size.
        decay (`float`, *optional*, defaults to `1.0`): \\(\lambda\\) in `[0, 1]`; 1 keeps every count (the
            public code's default).
        candidate_ratio (`float`, *optional*, defaults to `4.0`): candidates per selected prompt (our choice: the
            paper does not fix it; larger means greedier).
        target (`float`, *optional*, defaults to `0.5`): the success rate sought (the public code's default).
        decay_to_prior (`bool`, *optional*, defaults to `True`): decay toward Beta(1, 1), as the public code does.
        seed (`int`, *optional*, defaults to `0`): seeds candidates and Thompson samples.
    """

    name = "mopps"
    hyperparameters = ("decay", "candidate_ratio", "target", "decay_to_prior")

    def __init__(
        self,
        num_prompts: int,
        decay: float = 1.0,
        candidate_ratio: float = 4.0,
        target: float = 0.5,
        decay_to_prior: bool = True,
        seed: int = 0,
    ):
        for name, value, low, high in (("decay", decay, 0.0, 1.0), ("target", target, 0.0, 1.0)):
            if not (isinstance(value, (int, float)) and low <= value <= high):
                raise ValueError(f"{name} must lie in [{low}, {high}], got {value!r}.")
        if not (isinstance(candidate_ratio, (int, float)) and candidate_ratio >= 1):
            raise ValueError(
                f"candidate_ratio must be >= 1 (candidates per selected prompt), got {candidate_ratio!r}."
            )
        super().__init__(num_prompts, seed)
        self.decay, self.candidate_ratio, self.target, self.decay_to_prior = (
            decay,
            candidate_ratio,
            target,
            decay_to_prior,
        )
        self.alpha = np.ones(self.num_prompts)
        self.beta = np.ones(self.num_prompts)

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        batch_size, excluded = self._excluded(batch_size, exclude)
        allowed = np.setdiff1d(np.arange(self.num_prompts), excluded, assume_unique=True)
        pool = min(allowed.size, math.ceil(self.candidate_ratio * batch_size))
        candidates = self._rng.choice(allowed, size=pool, replace=False)
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
        return self._envelope(alpha=self.alpha.copy(), beta=self.beta.copy())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = self.num_prompts
        rng = self._open(state, {"alpha": ((n,), "f"), "beta": ((n,), "f")})
        alpha, beta = np.asarray(state["alpha"], dtype=np.float64), np.asarray(state["beta"], dtype=np.float64)
        if not (np.isfinite(alpha).all() and np.isfinite(beta).all() and (alpha > 0).all() and (beta > 0).all()):
            raise ValueError("state holds Beta parameters that are not finite and positive; it is corrupted.")
        self._rng, self.alpha, self.beta = rng, alpha.copy(), beta.copy()


class GRESOSelector(_Selector):
    r"""
    GRESO (Zheng et al., 2025): skip prompts whose recent groups were all right or all wrong, before rollout.

    A round walks the prompts in a seeded random order (epoch after epoch). A prompt whose last `c` groups were all
    correct is skipped with probability \\(1 - \max(p_{easy}^c, 0.01)\\), all wrong likewise with `p_hard`; a
    prompt never observed, or whose last group was mixed, is always kept. After each observed batch, `p_easy` moves
    by `step` toward keeping the share of all-correct groups at `target_zero_variance / 3` (up when below, down
    when above) and `p_hard` toward `2/3` of it, both clamped to `[0.05, 0.95]`.

    Args:
        num_prompts (`int`): the pool size.
        target_zero_variance (`float`, *optional*, defaults to `0.25`): the share of zero-variance groups sought.
        step (`float`, *optional*, defaults to `0.01`): the adjustment of `p_easy`, `p_hard` per batch.
        seed (`int`, *optional*, defaults to `0`): seeds the order and the skips.
    """

    name = "greso"
    hyperparameters = ("target_zero_variance", "step")
    EXPLORATION_FLOOR = 0.01

    def __init__(self, num_prompts: int, target_zero_variance: float = 0.25, step: float = 0.01, seed: int = 0):
        if not (isinstance(target_zero_variance, (int, float)) and 0 <= target_zero_variance <= 1):
            raise ValueError(f"target_zero_variance must lie in [0, 1], got {target_zero_variance!r}.")
        super().__init__(num_prompts, seed)
        self.target_zero_variance, self.step = target_zero_variance, step
        self.p_easy = self.p_hard = 0.5
        # streak > 0: the last `streak` groups were all correct; < 0: all wrong; 0: mixed, or never observed
        self.streak = np.zeros(self.num_prompts, dtype=np.int64)
        self.last_rate = np.full(self.num_prompts, 0.5)
        self._order = self._rng.permutation(self.num_prompts)
        self._position = 0

    def _keep_probability(self, indices: np.ndarray) -> np.ndarray:
        streak = self.streak[indices]
        easy = np.maximum(self.p_easy ** np.maximum(streak, 0), self.EXPLORATION_FLOOR)
        hard = np.maximum(self.p_hard ** np.maximum(-streak, 0), self.EXPLORATION_FLOOR)
        return np.where(streak > 0, easy, np.where(streak < 0, hard, 1.0))

    def select(self, batch_size: int, exclude=None) -> np.ndarray:
        batch_size, excluded = self._excluded(batch_size, exclude)
        chosen: list[int] = []
        visited = 0
        while len(chosen) < batch_size:
            if self._position == self.num_prompts:
                self._order, self._position = self._rng.permutation(self.num_prompts), 0
            index = int(self._order[self._position])
            self._position += 1
            visited += 1
            if index in chosen or np.isin(index, excluded):
                continue
            # after two full passes without filling the batch, keep whatever is allowed (all skipped otherwise)
            if visited > 2 * self.num_prompts or self._rng.uniform() < self._keep_probability(np.array([index]))[0]:
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
        for attribute, share, target in (
            ("p_easy", easy.mean(), self.target_zero_variance / 3),
            ("p_hard", hard.mean(), 2 * self.target_zero_variance / 3),
        ):
            value = getattr(self, attribute) + (self.step if share < target else -self.step if share > target else 0)
            setattr(self, attribute, min(max(value, 0.05), 0.95))

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
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        n = self.num_prompts
        rng = self._open(state, {"streak": ((n,), "i"), "last_rate": ((n,), "f"), "order": ((n,), "i")})
        p_easy, p_hard = float(state["p_easy"]), float(state["p_hard"])
        if not (0.05 <= p_easy <= 0.95 and 0.05 <= p_hard <= 0.95 and 0 <= int(state["position"]) <= n):
            raise ValueError("state holds p_easy, p_hard or a position out of range; it is corrupted.")
        self._rng, self.p_easy, self.p_hard = rng, p_easy, p_hard
        self.streak = np.asarray(state["streak"], dtype=np.int64).copy()
        self.last_rate = np.asarray(state["last_rate"], dtype=np.float64).copy()
        self._order, self._position = np.asarray(state["order"]).copy(), int(state["position"])
