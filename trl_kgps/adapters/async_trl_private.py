"""
The one place where trl-kgps reaches into TRL's asynchronous GRPO trainer (`AsyncGRPOTrainer`), whose rollout loop
has no public hook for choosing prompts.

`AsyncGRPOTrainer` trains on rank 0's `AsyncRolloutWorker`, which spawns a child process running `_AsyncRolloutLoop`:
it reads prompts with `_repeat_iterator` (the dataset in order, cycling), generates on vLLM, scores each finished group
with `_score_group` and queues the samples. KGPS keeps all of that and replaces only what the loop reads next
(`_repeat_iterator`), wraps the scoring (`_score_group`) and the worker's `stop()` and `check_health()`, and sets the
worker's loop class and arguments; `USED_MEMBERS` names every member it reads, wraps, replaces or relies on, and
`docs/trl.md` shows the table.

Everything else the adapter relies on, `check()` verifies by signature and by what each member's code calls and
sets, on whichever TRL release is installed, and refuses naming the member and what it found: the loop reads its
prompts through `_repeat_iterator` and scores every group through `_score_group`; the worker starts the child with its
`_loop_cls` and `_loop_kwargs`; the trainer builds its worker in `__init__`, drains `metrics_queue` in `log`, bumps
`model_version` at each weight sync and records the worker's place in its checkpoints. That the pieces work together
(saves through `save_model`, resume through `_load_optimizer_and_scheduler`, stale samples dropped after they were
scored) the integration tests show with the real trainer, on the releases CI installs (README: supported versions).
Each class is looked up where TRL keeps it: `trl.experimental.async_grpo` up to TRL 1.16, `trl.trainer` in the
releases that made the asynchronous trainer stable.
"""

import dataclasses
import functools
import importlib
import inspect
import time
import types
from typing import Any

import numpy as np

from .seam import UsedMember


# Where TRL releases keep the asynchronous trainer's modules, searched in order.
PACKAGES = ("trl.experimental.async_grpo", "trl.trainer")
MODULES = ("async_rollout_worker", "async_grpo_trainer")


USED_MEMBERS = (
    UsedMember("_AsyncRolloutLoop.__init__", names=("reward_funcs", "reward_func_names", "dataset", "num_generations",
           "_heartbeat_value", "_env_reward_types"), use="sets what KGPS's loop reads once built: `reward_funcs`, "
           "`reward_func_names`, `dataset`, `num_generations`, `_heartbeat_value`, `_env_reward_types`"),
    UsedMember("_AsyncRolloutLoop._provides_rollout_reward", use="read: whether a rollout reward column follows"),
    UsedMember("_AsyncRolloutLoop._repeat_iterator", parameters=(), coroutine=False, use="replaced: KGPS's prompts"),
    UsedMember("_AsyncRolloutLoop._generate_loop", names=("_repeat_iterator",), use="reads the prompts KGPS chooses, "
           "through `_repeat_iterator`"),
    UsedMember("_AsyncRolloutLoop._score_loop", names=("_score_group",), use="scores every group through "
           "`_score_group`"),
    UsedMember("_AsyncRolloutLoop._score_group", parameters=("group",), coroutine=True, names=("reward_funcs",
           "_env_reward_types", "_provides_rollout_reward"), use="wrapped: each group's rewards reach KGPS (it reads "
           "`reward_funcs`, `_env_reward_types`, `_provides_rollout_reward`)"),
    UsedMember("_child_main", names=("run", "_spawn_stop_watcher"), use="builds and runs (`run`) the loop KGPS hands "
           "the worker, whose stop watcher (`_spawn_stop_watcher`) waits for the worker's stop event"),
    UsedMember("AsyncRolloutWorker._loop_cls", use="set: the loop class, KGPS's mixed in"),
    UsedMember("AsyncRolloutWorker.__init__", names=("_loop_kwargs", "metrics_queue"), use="sets `_loop_kwargs`, the "
           "loop's arguments, which KGPS extends, and `metrics_queue`, which KGPS's metrics join"),
    UsedMember("AsyncRolloutWorker.start", names=("_loop_cls", "_loop_kwargs"), use="starts the child with the "
           "worker's `_loop_cls` and `_loop_kwargs`"),
    UsedMember("AsyncRolloutWorker.stop", parameters=(), names=("_stop_event_mp",), use="wrapped: KGPS's service "
           "stops after the worker; its stop event (`_stop_event_mp`) set when KGPS fails"),
    UsedMember("AsyncRolloutWorker.check_health", parameters=("stale_after_s",), use="wrapped: KGPS's error first"),
    UsedMember("AsyncGRPOTrainer.__init__", names=("rollout_worker", "model_version"), use="read: the worker "
           "(`rollout_worker`), the policy's version (`model_version`)"),
    UsedMember("AsyncGRPOTrainer.log", names=("metrics_queue",), use="drains KGPS's metrics from the worker's "
           "`metrics_queue` into the logs"),
    UsedMember("AsyncGRPOTrainer.get_train_dataloader", names=("check_health",), use="its wait for samples checks "
           "the worker's health (`check_health`)"),
    UsedMember("AsyncGRPOTrainer._sync_weight_merged", names=("model_version",), use="bumps `model_version`, the "
           "version KGPS's norms follow"),
    UsedMember("AsyncGRPOTrainer._sync_weight_lora", names=("model_version",), use="bumps `model_version`, the "
           "version KGPS's norms follow"),
    UsedMember("AsyncGRPOTrainer._save_checkpoint", names=("_loop_kwargs", "model_version"), use="records the "
           "worker's place: its prompt index (from `_loop_kwargs`) and `model_version`"),
)  # fmt: skip
# Below this, a sample's advantage is zero: TRL standardizes rewards by their std + 1e-8, so equal rewards give 0 up to
# float rounding, and rewards that differ give advantages of order 1.
ZERO_ADVANTAGE = 1e-6
# The fields of a scored group that KGPS reads.
GROUP_FIELDS = ("group_id", "model_version", "env_rewards", "rollout_rewards")
# The fields of a sample `_score_group` returns that KGPS reads (to drop a group of zero advantage).
SAMPLE_FIELDS = ("advantage",)


@functools.cache
def find(name: str) -> Any:
    """The class or function `name` of the installed TRL's asynchronous trainer, wherever its release keeps it."""
    for package in PACKAGES:
        for module in MODULES:
            try:
                found = getattr(importlib.import_module(f"{package}.{module}"), name, None)
            except ImportError:
                continue
            if found is not None:
                return found
    places = ", ".join(f"{package}.{module}" for package in PACKAGES for module in MODULES)
    raise LookupError(f"{name} is in none of {places}")


def _code_names(obj: Any) -> set[str]:
    """Every attribute and global name the code of `obj` (a function, nested code included) holds."""
    code = getattr(inspect.unwrap(obj), "__code__", None)
    names, todo = set(), [code] if code is not None else []
    while todo:
        code = todo.pop()
        names.update(code.co_names)
        todo.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
    return names


def _differs(used: UsedMember) -> str | None:
    """What the installed TRL's member differs in from what KGPS relies on; `None` when it does not."""
    owner, _, member = used.path.rpartition(".")
    try:
        value = find(owner or member)
        if owner:
            value = inspect.getattr_static(value, member)
    except (LookupError, AttributeError) as error:
        return f"it is missing ({error})"
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if used.parameters is not None:
        taken = [p.name for p in inspect.signature(value).parameters.values()][1 if owner else 0 :]
        if tuple(taken) != used.parameters:
            return f"it takes ({', '.join(taken)}), where KGPS relies on ({', '.join(used.parameters)})"
    if used.coroutine is not None and inspect.iscoroutinefunction(value) != used.coroutine:
        return f"it is {'not ' * used.coroutine}an async def"
    missing = [name for name in used.names if name not in _code_names(value)]
    if missing:
        return f"its code no longer names {', '.join(missing)}"
    return None


def check() -> None:
    """
    Raises `RuntimeError` naming the installed TRL, the first member whose signature or code differs from what KGPS
    relies on (`USED_MEMBERS`), and how.
    """
    import trl

    problems = [(member, why) for member in USED_MEMBERS if (why := _differs(member)) is not None]
    for name, read, use in (
        ("RolloutGroup", GROUP_FIELDS, "read: each scored group"),
        ("RolloutSample", SAMPLE_FIELDS, "read: each sample's advantage"),
    ):
        try:
            fields = {f.name for f in dataclasses.fields(find(name))}
        except (LookupError, TypeError):
            fields = set()
        if not problems and not set(read) <= fields:
            missing = ", ".join(sorted(set(read) - fields))
            problems.append((UsedMember(name, use=use), f"it has no field {missing}"))
    if problems:
        member, why = problems[0]
        raise RuntimeError(
            f"KGPSCallback drives AsyncGRPOTrainer through its private rollout loop, and in the installed TRL "
            f"{trl.__version__} `{member.path}` ({member.use}) has changed: {why}"
            f"{f' ({len(problems) - 1} more member(s) changed)' if len(problems) > 1 else ''}. Install a TRL release "
            "the README lists as supported, or use GRPOTrainer, whose public hooks KGPS supports across releases."
        )


def is_async_trainer(trainer: Any) -> bool:
    """Whether `trainer` is one of TRL's `AsyncGRPOTrainer`s (or a subclass), of any release, without importing it."""
    return any(
        cls.__name__ == "AsyncGRPOTrainer" and cls.__module__.startswith("trl.") for cls in type(trainer).__mro__
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
    position, dataset index, model version, rewards, dropped)` for every group it scored, `rewards` of shape
    `(completions, reward columns)`, NaN where a reward source returned `None`. With `kgps_drop_zero_advantage`, a
    group whose every sample has zero advantage (its rewards all equal: no gradient) is `dropped`: scored and reported,
    but none of its samples is queued for the trainer, and the worker generates on to fill the trainer's batch.
    """

    def __init__(self, *, kgps_address: str, kgps_authkey: bytes, kgps_drop_zero_advantage: bool = False, **kwargs):
        super().__init__(**kwargs)
        from multiprocessing.connection import Client

        self._kgps = Client(kgps_address, authkey=kgps_authkey)
        self._kgps_groups: dict[int, tuple[int, int, int]] = {}  # group id -> (batch id, position, dataset index)
        self._kgps_recorded: list[list[float | None] | None] = []
        self._kgps_drop_zero_advantage = kgps_drop_zero_advantage
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
        # Advantages are standardized rewards: equal rewards give exactly 0 up to rounding, unequal ones order 1.
        dropped = self._kgps_drop_zero_advantage and all(abs(s.advantage) < ZERO_ADVANTAGE for s in samples)
        rewards = self._kgps_rewards(group)
        self._kgps.send(("scored", batch_id, position, index, group.model_version, rewards, dropped))
        return [] if dropped else samples

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


def environment_factories(worker: Any) -> list[Any]:
    """The environment factories (or classes) the worker's loop builds environments with, whose `reset(**row)`
    receives each row."""
    factories = worker._loop_kwargs.get("environment_factory")
    return list(factories.values()) if isinstance(factories, dict) else [factories] if factories else []


def routes_environments(worker: Any) -> bool:
    """Whether the worker's loop routes each row to one of several environments by its `environment` column."""
    return isinstance(worker._loop_kwargs.get("environment_factory"), dict)


def check_worker(worker: Any) -> None:
    """Raises `TypeError` unless `worker` is TRL's `AsyncRolloutWorker` (or a subclass), whose loop KGPS reads from."""
    if not isinstance(worker, find("AsyncRolloutWorker")):
        raise TypeError(
            f"KGPS chooses prompts inside TRL's AsyncRolloutWorker, and this trainer's rollout_worker is a "
            f"{type(worker).__name__}. Pass no rollout_worker (TRL builds an AsyncRolloutWorker), or a subclass of "
            "AsyncRolloutWorker."
        )


def adopt(worker: Any, address: str, authkey: bytes, drop_zero_advantage: bool = False) -> None:
    """
    Makes `worker` (not yet started; one `check_worker` accepted) run its loop with `KGPSRolloutLoop` mixed in, which
    connects to the engine's listener at `address` with `authkey`, and keeps groups of zero advantage from the trainer
    if `drop_zero_advantage`.
    """
    base = worker._loop_cls
    if isinstance(base, functools.partial) and base.func is kgps_loop:  # adopted by an earlier train()
        base = base.args[0]
    worker._loop_cls = functools.partial(kgps_loop, base)
    worker._loop_kwargs.update(
        kgps_address=address, kgps_authkey=authkey, kgps_drop_zero_advantage=drop_zero_advantage
    )


def request_stop(worker: Any) -> None:
    """
    Sets `worker`'s stop event, as `worker.stop()` does first. KGPS does so when its engine fails, before the process
    learns of the failure and ends on it: a process that ends while its stop watcher waits for the event would leave
    the next `set()`, in `worker.stop()`, waiting for that watcher forever (a `multiprocessing.Event` wakes every
    waiter it had and waits for each to answer).
    """
    worker._stop_event_mp.set()


def check_health_after(worker: Any, check: Any) -> None:
    """Makes `worker.check_health(stale_after_s)`, which the trainer calls every few seconds while it waits for
    samples, call `check()` first: an error of KGPS's then ends training within those seconds, named as KGPS's."""
    check_health = worker.check_health

    def checked(stale_after_s):
        check()
        check_health(stale_after_s)

    worker.check_health = checked


def stop_after(worker: Any, stop: Any) -> None:
    """Makes `worker.stop()` also call `stop()` once the worker has stopped (its loop may be waiting on KGPS until its
    process ends)."""
    stop_worker = worker.stop

    def stop_then():
        stop_worker()
        stop()

    worker.stop = stop_then
