"""From the rewards a trainer computed to the binary outcomes KGPS observes: successes and scored rollouts."""

import logging
from collections.abc import Sequence

import numpy as np


logger = logging.getLogger(__name__)

# Generation batches with usable rewards, none reaching the threshold, after which a warning says so (once).
BATCHES_BEFORE_NO_SUCCESS_WARNING = 3
# Generation batches whose usable rewards all equal the threshold (every completion a success), after which a warning
# says so (once): a constant reward, or a threshold set at a partial credit.
BATCHES_BEFORE_ON_THRESHOLD_WARNING = 3


class SuccessRule:
    """
    Which completions count as successes, and which count at all.

    KGPS models binomial outcomes. A completion *counts* (toward `k`) when it has a usable reward, and *succeeds*
    (toward `s`) when that reward reaches `threshold`:

    - with `success_reward` set: the named reward function's value; a `None`/NaN there means no usable reward;
    - otherwise: the trainer's weighted total, `sum_f w_f r_f` over the reward functions that returned a value;
      a completion for which every function returned `None`/NaN does not count.

    Rewards that are not all 0 or 1 (format bonuses, length penalties, partial credit) still follow the rule, and
    a warning says so once, with the fix; so does a threshold that no usable reward has reached in the first
    `BATCHES_BEFORE_NO_SUCCESS_WARNING` batches, and one that every usable reward of the first
    `BATCHES_BEFORE_ON_THRESHOLD_WARNING` batches sits on exactly (every completion a success). An infinite reward is
    a fault of the reward function, and raises.

    Args:
        reward_names (`Sequence[str]`): the trainer's `reward_func_names`.
        reward_weights (`Sequence[float]`): the trainer's `reward_weights`.
        success_reward (`str`, *optional*): the reward function that decides success.
        threshold (`float`): the least reward that is a success.
    """

    def __init__(
        self,
        reward_names: Sequence[str],
        reward_weights: Sequence[float],
        success_reward: str | None,
        threshold: float,
    ):
        self.reward_names = list(reward_names)
        self.threshold = threshold
        self.column: int | None = None
        if success_reward is not None:
            if success_reward not in self.reward_names:
                raise ValueError(
                    f"success_reward={success_reward!r} is not one of the trainer's reward functions "
                    f"{self.reward_names}: set it to the name of the function that scores correctness."
                )
            self.column = self.reward_names.index(success_reward)
        elif len(self.reward_names) > 1:
            logger.warning(
                "KGPS counts a completion as a success when the weighted sum of the rewards %s is >= %g: if some of "
                "them are bonuses or penalties, set success_reward to the one that scores correctness.",
                self.reward_names,
                threshold,
            )
        self.weights = np.asarray(reward_weights, dtype=np.float64)
        self._warned_non_binary = False
        self._batches_without_success = 0  # batches with usable rewards, while none has reached the threshold
        self._largest_reward = -np.inf
        self._batches_on_threshold = 0  # batches with usable rewards, while every one has equalled the threshold

    def describe(self) -> str:
        if self.column is not None:
            return f"{self.reward_names[self.column]} >= {self.threshold:g}"
        if len(self.reward_names) == 1:
            return f"{self.reward_names[0]} >= {self.threshold:g}"
        return f"weighted sum of {self.reward_names} >= {self.threshold:g}"

    def __call__(self, rewards_per_func: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """
        Args:
            rewards_per_func (`np.ndarray` of shape `(completions, reward_functions)`): NaN where a function
                returned `None` or NaN, which the trainer does not tell apart.

        Returns:
            `(success, counted)`: boolean arrays of shape `(completions,)`; `success` implies `counted`.

        Raises:
            `ValueError`: a reward is infinite, naming the reward function and the completion.
        """
        infinite = np.argwhere(np.isinf(rewards_per_func))
        if infinite.size:
            completion, function = (int(i) for i in infinite[0])
            raise ValueError(
                f"The reward function {self.reward_names[function]!r} returned "
                f"{rewards_per_func[completion, function]} for completion {completion} of this generation batch: a "
                "reward must be a finite number (or None for no reward), or GRPO's advantages become NaN. Fix the "
                "reward function."
            )
        if self.column is not None:
            values = rewards_per_func[:, self.column]
            counted = ~np.isnan(values)
        else:
            counted = ~np.isnan(rewards_per_func).all(axis=1)
            values = np.nansum(rewards_per_func * self.weights, axis=1)
        usable = values[counted]
        if not self._warned_non_binary and usable.size:
            self._warn_unless_binary(usable)
        success = counted & (values >= self.threshold)
        if usable.size and self._batches_without_success >= 0:
            self._count_batch_without_success(bool(success.any()), float(usable.max()))
        if usable.size and self._batches_on_threshold >= 0:
            self._count_batch_on_threshold(self._all_on_threshold(usable))
        return success, counted

    def _all_on_threshold(self, rewards: np.ndarray) -> bool:
        """Whether every one of `rewards` equals the threshold, as float32 holds both (the trainer's rewards are)."""
        return bool((rewards.astype(np.float32) == np.float32(self.threshold)).all())

    def _count_batch_on_threshold(self, on_threshold: bool) -> None:
        """Warns once when every usable reward of `BATCHES_BEFORE_ON_THRESHOLD_WARNING` batches in a row, from the
        first, equalled the threshold: every completion counted as a success."""
        if not on_threshold:
            self._batches_on_threshold = -1  # a reward off the threshold was seen: nothing more to watch
            return
        self._batches_on_threshold += 1
        if self._batches_on_threshold == BATCHES_BEFORE_ON_THRESHOLD_WARNING:
            logger.warning(
                "Every reward of the first %d generation batches equals success_threshold, %g, exactly, so every "
                "completion counts as a success (%s) and KGPS learns every prompt as solved: if a reward of %g is "
                "not a success (a constant reward, a partial credit), set success_threshold above it, or "
                "success_reward to the reward function that scores correctness.",
                BATCHES_BEFORE_ON_THRESHOLD_WARNING,
                self.threshold,
                self.describe(),
                self.threshold,
            )

    def _count_batch_without_success(self, succeeded: bool, largest: float) -> None:
        """Warns once when `BATCHES_BEFORE_NO_SUCCESS_WARNING` batches in a row, from the first, had no success."""
        if succeeded:
            self._batches_without_success = -1  # a success was seen: nothing more to watch
            return
        self._batches_without_success += 1
        self._largest_reward = max(self._largest_reward, largest)
        if self._batches_without_success == BATCHES_BEFORE_NO_SUCCESS_WARNING:
            logger.warning(
                "No completion of the first %d generation batches reached %s (the largest reward was %g), so KGPS "
                "learns every prompt as failing: if a correct answer gets less than %g, set success_threshold to the "
                "least reward it gets; if the model solves none of these prompts yet, they are out of its reach.",
                BATCHES_BEFORE_NO_SUCCESS_WARNING,
                self.describe(),
                self._largest_reward,
                self.threshold,
            )

    def _warn_unless_binary(self, rewards: np.ndarray) -> None:
        """Warns once, when `rewards` (the usable ones of a batch) are not all 0 or 1, how they are read and the
        fix."""
        odd = rewards[~np.isin(rewards, (0.0, 1.0))]
        if not odd.size or self._all_on_threshold(rewards):  # said by `_count_batch_on_threshold`
            return
        top = float(rewards.max())
        if top > 1 and self.threshold <= 1:
            logger.warning(
                "KGPS reads rewards up to %g and counts a completion as a success when %s, so a partial credit of 1 "
                "succeeds too: set success_threshold to the least reward a correct answer gets (e.g. %g), and "
                "success_reward to the function that gives it if others are added.",
                top,
                self.describe(),
                top,
            )
        else:
            logger.warning(
                "KGPS needs binary outcomes and the rewards it reads are not all 0 or 1 (e.g. %g), so it counts a "
                "completion as a success when %s: if a format bonus or a length penalty is mixed in, set "
                "success_reward to the reward function that scores correctness (and success_threshold if needed).",
                odd[0],
                self.describe(),
            )
        self._warned_non_binary = True
