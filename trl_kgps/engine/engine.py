r"""
The selection engine: what KGPS does in a trainer, with no trainer in it. Both adapters drive one: the synchronous
`KGPSCallback` + `KGPSRepeatSampler` (TRL's `GRPOTrainer`, `RLOOTrainer`) and the asynchronous rollout loop
(`trl_kgps.adapters.async_grpo`, TRL's `AsyncGRPOTrainer`).

The engine is the one owner of the selector: it alone calls it. Per generation batch of `B` prompts it

1. chooses the batch (`choose`): a slice of the warmup's seeded permutation, then the selector's choice among the
   prompts not pending;
2. turns each group's rewards into successes `s` and scored rollouts `k` (`outcomes`, by the `SuccessRule`);
3. feeds them to the selector (`observe`: a prompt's first observation during the warmup initialises its belief) and
   returns the batch's `kgps/*` metrics;
4. widens every belief for a policy update of norm \\(\lVert \theta_t - \theta_{t-1} \rVert_2\\) (`predict`), and
   returns its metrics.

Its `ledger` (`BatchLedger`, which holds no selector) records each batch from its choice to its outcomes, and saves
and restores that record (`ledger.state_dict`). The adapters say where the batches, the rewards and the norms come
from.
"""

import time
import warnings

import numpy as np

from .ledger import BatchLedger, ChosenBatch, Observed, check_batch_size
from .metrics import batch_metrics, shared_metrics
from .outcomes import SuccessRule
from .protocol import PromptSelector


def build_engine(
    selector: PromptSelector,
    num_prompts: int,
    batch_size: int,
    warmup_epochs: int | None = None,
    seed: int = 0,
    batch_formula: str = "",
) -> "SelectionEngine":
    """
    The engine of a trainer's run over a dataset of `num_prompts` rows, in generation batches of `batch_size` prompts
    (which the trainer sets by `batch_formula`, named when it does not fit): `selector` must track the dataset's rows,
    and the uniform warmup takes `warmup_epochs` epochs of `num_prompts // batch_size` batches (unset: the selector's
    `config.warmup_epochs`, or 0 for a baseline). Raises `ValueError` when they do not fit.
    """
    check_batch_size(batch_size, num_prompts, batch_formula)
    if selector.num_prompts != num_prompts:
        raise ValueError(
            f"The selector tracks {selector.num_prompts} prompts but the dataset has {num_prompts}. Build the "
            "selector with `KGPSSelector(len(train_dataset))`."
        )
    if warmup_epochs is None:
        warmup_epochs = getattr(getattr(selector, "config", None), "warmup_epochs", 0)
    return SelectionEngine(selector, batch_size, warmup_epochs * (num_prompts // batch_size), seed)


class SelectionEngine:
    """
    One run's prompt selection over `selector.num_prompts` prompts, `batch_size` prompts a generation batch.

    Args:
        selector (`PromptSelector`): chooses the batches after the warmup and receives the outcomes.
        batch_size (`int`): `B`, distinct prompts per generation batch.
        warmup_batches (`int`, *optional*, defaults to `0`): uniform batches first (see `BatchLedger`).
        seed (`int`, *optional*, defaults to `0`): seeds the warmup's permutations.

    Attributes:
        selector (`PromptSelector`): the selector, which only the engine calls.
        ledger (`BatchLedger`): the record of the rounds: pending batches, counters, prompts observed; of
            `ledger_class`.
        rule (`SuccessRule` or `None`): how rewards become outcomes; the adapter sets it once it knows the reward
            functions.
    """

    ledger_class: type[BatchLedger] = BatchLedger

    def __init__(
        self,
        selector: PromptSelector,
        batch_size: int,
        warmup_batches: int = 0,
        seed: int = 0,
    ):
        self.selector = selector
        self.ledger = self.ledger_class(selector.num_prompts, batch_size, warmup_batches, seed)
        self.rule: SuccessRule | None = None
        self._warned_no_rewards = False
        self._no_reward_from: list[str] = []  # the reward functions with no reward for any of the last batch

    def choose(self) -> np.ndarray:
        """The next generation batch, `(B,)` int64, now pending: during the warmup a slice of the ledger's seeded
        permutation, then the selector's choice among the prompts not pending (`BatchLedger.exclude`)."""
        select_seconds = None
        batch = self.ledger.warmup_batch()
        if batch is None:
            start = time.perf_counter()
            batch = self.selector.select(self.ledger.batch_size, exclude=self.ledger.exclude())
            select_seconds = time.perf_counter() - start
        batch = np.asarray(batch, dtype=np.int64)
        self.ledger.add_chosen(batch, self.selector.predicted_success(batch), select_seconds)
        return batch

    def outcomes(self, rewards_per_func: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
        """
        `(s, k)`, `(groups,)` int64 each, from the rewards of consecutive groups of `group_size` completions:
        `rewards_per_func` of shape `(groups * group_size, reward_functions)`, NaN where a function returned `None`
        or NaN (the trainer stores a `None` as NaN).
        """
        success, counted = self.rule(rewards_per_func)
        # The functions whose `None`s leave a completion uncounted: the rule's own, or any.
        silent = np.isnan(rewards_per_func).all(axis=0)
        self._no_reward_from = [
            name
            for c, (name, none) in enumerate(zip(self.rule.reward_names, silent))
            if none and self.rule.column in (None, c)
        ]
        return success.reshape(-1, group_size).sum(axis=1), counted.reshape(-1, group_size).sum(axis=1)

    def observe(
        self,
        batch: np.ndarray,
        successes: np.ndarray,
        trials: np.ndarray,
        *,
        chosen: ChosenBatch | None = None,
    ) -> tuple[Observed | None, dict[str, float]]:
        """
        Feeds the outcomes of a scored batch to the selector: `successes` `s` and `trials` `k` (`(B,)` each) of the
        prompts `batch` (`(B,)`), in that order; during the warmup a prompt's first observation initialises its belief.
        Where batches finish in any order, as in the asynchronous trainer, `chosen` names its pending record
        (`BatchLedger.take_scored`). Returns `(scored, metrics)`: `scored` is `None` for the last batch scored again,
        whose outcomes were already observed (then `metrics` is empty). Raises `ValueError` for a batch that was never
        chosen, before anything changes.
        """
        batch = np.asarray(batch, dtype=np.int64)
        taken = self.ledger.take_scored(batch, chosen)
        if taken is None:
            return None, {}
        record, skipped = taken
        s, k = np.asarray(successes, dtype=np.int64), np.asarray(trials, dtype=np.int64)
        warmup = self.ledger.in_warmup
        if warmup:
            first = ~self.ledger.observed[batch]
            self.selector.initialize(batch[first], s[first], k[first])
            self.selector.update(batch[~first], s[~first], k[~first])
        else:
            self.selector.update(batch, s, k)
        scored = self.ledger.add_scored(record, batch, s, k, warmup, skipped)
        if not scored.trials.any() and not self._warned_no_rewards:
            warnings.warn(
                f"KGPS observed no reward for generation batch {self.ledger.batches_scored}: {self._silent()} "
                "returned None or NaN for every completion (the trainer stores a None as NaN, so KGPS cannot tell "
                "which), so no prompt's belief changed. KGPS learns only from scored completions: check that a reward "
                "function scores these prompts (or set success_reward to one that does).",
                stacklevel=3,
            )
            self._warned_no_rewards = True
        metrics = batch_metrics(scored, self.ledger.coverage, getattr(self.selector, "last_nis", None))
        if getattr(self.selector, "shared", None) is not None:
            metrics.update(shared_metrics(self.selector, scored))
        return scored, metrics

    def _silent(self) -> str:
        """The reward functions that returned None or NaN for every completion of the last batch, as a warning names
        them."""
        names = self._no_reward_from
        if not names:
            return "the reward functions"
        if len(names) > 1:
            return f"the reward functions {', '.join(map(repr, names))}"
        decides = self.rule is not None and self.rule.column is not None
        return f"the reward function {names[0]!r}{' (success_reward)' if decides else ''}"

    def predict(self, delta_norm: float) -> dict[str, float]:
        """
        Widens every belief for an update of norm `delta_norm` (after the warmup); returns `kgps/delta_norm` and
        `kgps/process_noise` (the `Q` applied, for a selector with process noise).

        Raises:
            `ValueError`: from the selector, before any belief changes, for a `Q` above `config.MAX_LOGIT_VARIANCE`
                (`KGPSSelector.predict`).
        """
        metrics = {"kgps/delta_norm": delta_norm}
        if self.ledger.in_warmup:
            return metrics
        if hasattr(self.selector, "process_noise"):
            metrics["kgps/process_noise"] = self.selector.process_noise(delta_norm)
        self.selector.predict(delta_norm)
        return metrics
