"""
The one place where trl-kgps reaches into TRL's asynchronous GRPO trainer (`trl.experimental.async_grpo`), whose
rollout loop has no public hook for choosing prompts.

`AsyncGRPOTrainer` trains on rank 0's `AsyncRolloutWorker`, which spawns a child process running `_AsyncRolloutLoop`:
it reads prompts with `_repeat_iterator` (the dataset in order, cycling), generates on vLLM, scores each finished group
with `_score_group` and queues the samples. KGPS keeps all of that and replaces only what the loop reads next:

| member | use |
|---|---|
| `_AsyncRolloutLoop._repeat_iterator()` | replaced: yields the prompts the selection engine chooses, `(group id, row)` once per completion |
| `_AsyncRolloutLoop._score_group(group)` | wrapped: each group's rewards (one column per reward source) go to the engine |
| `_AsyncRolloutLoop.reward_funcs`, `reward_func_names`, `_env_reward_types`, `_provides_rollout_reward` | read: the reward columns, as `_score_group` builds them |
| `AsyncRolloutWorker._loop_cls`, `_loop_kwargs` | set on the trainer's worker before it starts: the loop class and its channel to the engine; `_loop_kwargs["reward_funcs"]` read: which columns a reward function reads, never metadata |
| `AsyncRolloutWorker.metrics_queue` | appended to: `kgps/*` metrics, which the trainer's `log()` drains into its logs |
| `AsyncGRPOTrainer.rollout_worker`, `args.weight_sync_steps` | read: the worker, and when the served policy changes version |

Everything else the adapter relies on (the trainer builds its worker after its callbacks, saves through `save_model`,
resumes through `_load_optimizer_and_scheduler`, bumps the version after each weight sync, drops stale samples after
they were scored) is in the sources fingerprinted in `SUPPORTED`: `check()` refuses any TRL whose private async code
differs from the release it was checked on, naming the release and the member.
"""

import functools
import hashlib
import inspect
import time
from typing import Any

import numpy as np


# TRL releases whose asynchronous trainer was checked against this module, with the SHA-256 (first 16 hex digits) of
# the source of every private member the adapter depends on (`python -m trl_kgps._async_trl` prints the installed ones).
SUPPORTED = {
    "1.16.0": {
        "async_rollout_worker._AsyncRolloutLoop.__init__": "f2f7fc012668b22c",
        "async_rollout_worker._AsyncRolloutLoop._generate_loop": "ba2da28437369bdd",
        "async_rollout_worker._AsyncRolloutLoop._score_loop": "a4356a487c050c7a",
        "async_rollout_worker._AsyncRolloutLoop._repeat_iterator": "ed97bff71aee925b",
        "async_rollout_worker._AsyncRolloutLoop._score_group": "d032308d2e87d971",
        "async_rollout_worker._child_main": "46f9d71e596829fd",
        "async_rollout_worker.AsyncRolloutWorker.__init__": "4421bac6f1128f93",
        "async_rollout_worker.AsyncRolloutWorker.start": "32344ffaef4ab484",
        "async_rollout_worker.AsyncRolloutWorker.stop": "e53629230ba4d6eb",
        "async_grpo_trainer.RolloutQueueDataset.__iter__": "d92a084c61a3511c",
        "async_grpo_trainer.AsyncGRPOTrainer.__init__": "8ef1227654a229e7",
        "async_grpo_trainer.AsyncGRPOTrainer.log": "f16119a908c28611",
        "async_grpo_trainer.AsyncGRPOTrainer._sync_weight_merged": "ab2541763c20cba1",
        "async_grpo_trainer.AsyncGRPOTrainer._sync_weight_lora": "4a4ad08eb92eaf64",
        "async_grpo_trainer.AsyncGRPOTrainer._save_checkpoint": "ac7c7c0f73d720da",
        "async_grpo_trainer.AsyncGRPOTrainer._inner_training_loop": "83ea8e8f30f62e92",
    },
}

_MEMBERS = (
    "async_rollout_worker._AsyncRolloutLoop.__init__",
    "async_rollout_worker._AsyncRolloutLoop._generate_loop",
    "async_rollout_worker._AsyncRolloutLoop._score_loop",
    "async_rollout_worker._AsyncRolloutLoop._repeat_iterator",
    "async_rollout_worker._AsyncRolloutLoop._score_group",
    "async_rollout_worker._child_main",
    "async_rollout_worker.AsyncRolloutWorker.__init__",
    "async_rollout_worker.AsyncRolloutWorker.start",
    "async_rollout_worker.AsyncRolloutWorker.stop",
    "async_grpo_trainer.RolloutQueueDataset.__iter__",
    "async_grpo_trainer.AsyncGRPOTrainer.__init__",
    "async_grpo_trainer.AsyncGRPOTrainer.log",
    "async_grpo_trainer.AsyncGRPOTrainer._sync_weight_merged",
    "async_grpo_trainer.AsyncGRPOTrainer._sync_weight_lora",
    "async_grpo_trainer.AsyncGRPOTrainer._save_checkpoint",
    "async_grpo_trainer.AsyncGRPOTrainer._inner_training_loop",
)


def _member(path: str) -> Any:
    import importlib

    module, *attributes = path.split(".")
    value = importlib.import_module(f"trl.experimental.async_grpo.{module}")
    for attribute in attributes:
        value = getattr(value, attribute)
    return value


def fingerprints() -> dict[str, str]:
    """{member: the first 16 hex digits of the SHA-256 of its source}, for the installed TRL's members that the adapter
    depends on."""
    return {path: hashlib.sha256(inspect.getsource(_member(path)).encode()).hexdigest()[:16] for path in _MEMBERS}


def is_async_trainer(trainer: Any) -> bool:
    """Whether `trainer` is one of TRL's `AsyncGRPOTrainer`s (or a subclass), of any release, without importing it."""
    return any(
        cls.__name__ == "AsyncGRPOTrainer" and cls.__module__.startswith("trl.") for cls in type(trainer).__mro__
    )


def check() -> None:
    """Raises `RuntimeError` naming the installed TRL and the first member that differs from a supported release."""
    import trl

    version = trl.__version__
    expected = SUPPORTED.get(version)
    if expected is None:
        raise RuntimeError(
            f"KGPSCallback drives AsyncGRPOTrainer through its private rollout loop, which it was checked on for TRL "
            f"{', '.join(SUPPORTED)}; this is TRL {version}. Install a checked release "
            f'(`pip install "trl=={max(SUPPORTED)}"`), or use GRPOTrainer, whose public hooks KGPS supports across '
            "releases."
        )
    found = fingerprints()
    changed = [path for path in _MEMBERS if found[path] != expected[path]]
    if changed:
        raise RuntimeError(
            f"KGPSCallback drives AsyncGRPOTrainer through its private rollout loop, and in the installed TRL "
            f"{version} `{changed[0]}` differs from the TRL {version} release it was checked on "
            f"({len(changed)} member{'s' * (len(changed) > 1)} differ). Install the released TRL {version} "
            f'(`pip install --force-reinstall "trl=={version}"`).'
        )


# The child process ---------------------------------------------------------------------------------------------------


class KGPSRolloutLoop:
    """
    Mixed into the rollout loop class the worker runs (`kgps_loop`): reads the prompts the engine chooses instead of
    the dataset in order, and reports every scored group's rewards. Generation, scoring, the samples and their queue
    are TRL's.

    It talks to the engine over one connection (`multiprocessing.connection`, whose address and key are picklable
    loop arguments, where TRL's spawn refuses a queue): it sends `("columns", names)` once, then `("choose",)` when it
    needs prompts, answered by `(batch id, [dataset indices])` (or `("error", message)`), and `("scored", batch id,
    position, dataset index, model version, rewards)` for every group it scored, `rewards` of shape `(completions,
    reward columns)`, NaN where a reward source returned `None`.
    """

    def __init__(self, *, kgps_address: str, kgps_authkey: bytes, **kwargs):
        super().__init__(**kwargs)
        from multiprocessing.connection import Client

        self._kgps = Client(kgps_address, authkey=kgps_authkey)
        self._kgps_groups: dict[int, tuple[int, int, int]] = {}  # group id -> (batch id, position, dataset index)
        self._kgps_recorded: list[list[float | None] | None] = []
        self.reward_funcs = [_recorded(f, self._kgps_recorded, i) for i, f in enumerate(self.reward_funcs)]
        self._kgps.send(("columns", list(self.reward_func_names)))

    def _repeat_iterator(self):
        group_id = 0
        while True:
            batch_id, indices = self._kgps_next_batch()
            for position, index in enumerate(indices):
                self._kgps_groups[group_id] = (batch_id, position, index)
                row = self.dataset[index]
                for _ in range(self.num_generations):
                    yield group_id, row
                group_id += 1

    def _kgps_next_batch(self) -> tuple[int, list[int]]:
        self._kgps.send(("choose",))
        while not self._kgps.poll(1.0):
            self._heartbeat_value.value = time.time()  # waiting on the engine is not a hung worker
        reply = self._kgps.recv()
        if reply[0] == "error":
            raise RuntimeError(f"KGPS's selection engine failed: {reply[1]}")
        return reply

    async def _score_group(self, group):
        self._kgps_recorded[:] = [None] * len(self.reward_funcs)
        samples = await super()._score_group(group)
        batch_id, position, index = self._kgps_groups.pop(group.group_id)
        self._kgps.send(("scored", batch_id, position, index, group.model_version, self._kgps_rewards(group)))
        return samples

    def _kgps_rewards(self, group) -> np.ndarray:
        """`(completions, columns)` float64: the reward columns `_score_group` sums, NaN where one returned `None`."""
        columns = list(self._kgps_recorded)
        for env_type in self._env_reward_types:
            columns.append([r[1] if r is not None and r[0] is env_type else None for r in group.env_rewards])
        if self._provides_rollout_reward:
            columns.append(list(group.rollout_rewards))
        return np.array([[np.nan if r is None else r for r in column] for column in columns], dtype=float).T


def _recorded(reward_func, record: list, column: int):
    """`reward_func`, sync or async as it was, that also writes its rewards to `record[column]`."""
    from trl.trainer.utils import is_async_callable

    if is_async_callable(reward_func):

        @functools.wraps(reward_func)
        async def recorded(*args, **kwargs):
            rewards = await reward_func(*args, **kwargs)
            record[column] = rewards
            return rewards

    else:

        @functools.wraps(reward_func)
        def recorded(*args, **kwargs):
            rewards = reward_func(*args, **kwargs)
            record[column] = rewards
            return rewards

    return recorded


@functools.cache
def _mixed(base: type) -> type:
    return type(f"KGPS{base.__name__}", (KGPSRolloutLoop, base), {"__module__": __name__})


def kgps_loop(base: type, **kwargs):
    """The worker's loop: `base` (TRL's `_AsyncRolloutLoop` or a subclass) with `KGPSRolloutLoop` mixed in. A
    module-level function, so that the spawned child unpickles `functools.partial(kgps_loop, base)` by reference."""
    return _mixed(base)(**kwargs)


def reward_funcs(worker: Any) -> list[Any]:
    """The reward functions the worker's loop will score with."""
    return list(worker._loop_kwargs.get("reward_funcs") or [])


def check_worker(worker: Any) -> None:
    """Raises `TypeError` unless `worker` is TRL's `AsyncRolloutWorker` (or a subclass), whose loop KGPS reads from."""
    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker

    if not isinstance(worker, AsyncRolloutWorker):
        raise TypeError(
            f"KGPS chooses prompts inside TRL's AsyncRolloutWorker, and this trainer's rollout_worker is a "
            f"{type(worker).__name__}. Pass no rollout_worker (TRL builds an AsyncRolloutWorker), or a subclass of "
            "AsyncRolloutWorker."
        )


def adopt(worker: Any, address: str, authkey: bytes) -> None:
    """
    Makes `worker` (not yet started; one `check_worker` accepted) run its loop with `KGPSRolloutLoop` mixed in, which
    connects to the engine's listener at `address` with `authkey`.
    """
    base = worker._loop_cls
    if isinstance(base, functools.partial) and base.func is kgps_loop:  # adopted by an earlier train()
        base = base.args[0]
    worker._loop_cls = functools.partial(kgps_loop, base)
    worker._loop_kwargs.update(kgps_address=address, kgps_authkey=authkey)


if __name__ == "__main__":
    import json

    import trl

    print(json.dumps({trl.__version__: fingerprints()}, indent=4))
