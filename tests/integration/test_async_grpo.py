"""
KGPS in TRL's real `AsyncGRPOTrainer` on CPU: its rollout worker (a spawned child process), scoring, packing, staleness
filter, weight syncs and checkpoints are TRL's; `async_standins` replaces only vLLM's generation, the NCCL weight
transfer, the FA3 attention kernel and the peak-FLOPs probe, each named there.

Two modes. Deterministic: one group in flight at a time, generated in order, so the run is a fixed sequence; every
operation on the selection engine is logged, and the selector's state must equal a replay of those operations, whose
outcomes must be the rewards the reward function computed for those prompts. Threaded: four groups in flight with
random delays, so groups finish out of order; invariants: no prompt lost or counted twice.
"""

import collections
import contextlib
import copy
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch


pytest.importorskip("aiohttp")
try:
    import trl.experimental.async_grpo as async_grpo
except ImportError as error:
    import trl
    from packaging.version import Version

    # CI installs TRL 1.16 or newer beside the oldest declared release, which has no asynchronous trainer: there a
    # trainer that moved fails, elsewhere it skips.
    if os.environ.get("CI", "").lower() in ("true", "1") and Version(trl.__version__) >= Version("1.16.0"):
        raise
    pytest.skip(f"TRL {trl.__version__} has no trl.experimental.async_grpo ({error})", allow_module_level=True)

import async_standins as standins  # noqa: E402 - needs TRL's asynchronous trainer
from transformers import TrainerCallback  # noqa: E402

from trl_kgps import KGPSCallback, KGPSConfig  # noqa: E402
from trl_kgps.adapters import async_trl_private as _async_trl  # noqa: E402
from trl_kgps.adapters.dataset_columns import selector_for  # noqa: E402
from trl_kgps.engine import state_file as _state_file  # noqa: E402
from trl_kgps.engine.engine import SelectionEngine  # noqa: E402


pytestmark = pytest.mark.slow

G = 4  # completions per prompt
B = 2  # groups a step: per_device_train_batch_size 8 / 4
CONFIG = KGPSConfig(feature_columns=["level"], delta_norm_sample=1.0)
SELECTORS = ["kgps", "uniform", "mopps", "greso", "dps"]


def require_contract(environ=os.environ) -> None:
    """
    Passes when the installed TRL's `AsyncGRPOTrainer` keeps what KGPS relies on (`async_trl_private.check`). When it
    does not: under CI, which installs the TRL releases KGPS is tested on, fails naming the member that changed; on
    any other TRL, skips with the same message.
    """
    try:
        _async_trl.check()
    except RuntimeError as error:
        if environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(str(error))
        pytest.skip(str(error))


@pytest.fixture
def async_contract():
    require_contract()


supported = pytest.mark.usefixtures("async_contract")


def test_a_changed_member_fails_under_ci_naming_it_and_skips_elsewhere(monkeypatch):
    require_contract({"CI": "true"})  # the installed TRL keeps the contract
    loop = _async_trl.find("_AsyncRolloutLoop")
    monkeypatch.delattr(loop, "_score_group")
    with pytest.raises(pytest.fail.Exception, match=r"_AsyncRolloutLoop\._score_group.*missing"):
        require_contract({"CI": "true"})
    with pytest.raises(pytest.skip.Exception, match=r"_AsyncRolloutLoop\._score_group"):
        require_contract({})


@pytest.fixture(autouse=True)
def stand_ins(monkeypatch):
    standins.install(monkeypatch)
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")


class EngineLog(TrainerCallback):
    """Every operation on the selection engine in order (under its lock), and the batches handed to the worker. Its
    wrappers go on when training begins: after a resume has loaded the state, before the worker starts."""

    def __init__(self, kgps):
        self.kgps = kgps
        self.ops, self.handed, self.loaded = [], [], None

    def on_train_begin(self, args, state, control, **kwargs):
        engine, service = self.kgps.engine, self.kgps.adapter.service
        self.loaded = snapshot(engine)
        choose, observe, predict, hand = engine.choose, engine.observe, engine.predict, service.choose

        def spy_choose():
            batch = choose()
            self.ops.append(("choose", batch.copy()))
            return batch

        def spy_observe(batch, s, k, **kwargs):
            self.ops.append(("observe", np.array(batch), np.array(s), np.array(k)))
            return observe(batch, s, k, **kwargs)

        def spy_predict(delta_norm):
            self.ops.append(("predict", delta_norm))
            return predict(delta_norm)

        def spy_hand():
            batch_id, indices = hand()
            self.handed.append(indices)
            return batch_id, indices

        engine.choose, engine.observe, engine.predict = spy_choose, spy_observe, spy_predict
        service.choose = spy_hand


def snapshot(engine):
    return engine.selector.state_dict(), engine.ledger.state_dict()


def assert_same_state(actual, expected):
    """Selector and ledger states equal bit for bit, but for how long each pending choice took (a wall time)."""
    for got, want in zip(actual, expected):
        assert got.keys() == want.keys()
        for key, value in want.items():
            if key == "pending_select_seconds":
                continue
            if isinstance(value, np.ndarray):
                np.testing.assert_array_equal(got[key], value, err_msg=key)
            else:
                assert got[key] == value, key


def same_state(actual, expected) -> bool:
    try:
        assert_same_state(actual, expected)
    except AssertionError:
        return False
    return True


def fresh_engine(name, dataset, seed=0):
    selector = selector_for(name, dataset, CONFIG, seed)
    return SelectionEngine(selector, B, 0, seed)


def replay(engine, ops):
    """Feeds `ops` to `engine`; every choice must be the logged one."""
    for op in ops:
        if op[0] == "choose":
            np.testing.assert_array_equal(engine.choose(), op[1])
        elif op[0] == "observe":
            # batches finish in any order: the record is named, as the selection service names it
            chosen = next(p for p in engine.ledger.pending if np.array_equal(p.indices, op[1]))
            engine.observe(op[1], op[2], op[3], chosen=chosen)
        else:
            engine.predict(op[1])
    return engine


def train(
    tmp_path,
    *,
    selector="kgps",
    config=CONFIG,
    delay_seed=None,
    in_flight=G,
    resume=None,
    name="run",
    drop=False,
    reward=None,
    **args,
):
    """A run of the real trainer with KGPS (`selector`; `drop`: `drop_zero_advantage`) and `in_flight` completions
    generated at once, scored by `reward` (`FirstWord` by default); returns `(trainer, callback, its EngineLog,
    dataset, the worker's reward log)`."""
    path, tokenizer, dataset = standins.setup(tmp_path)
    args = standins.config(tmp_path / name, **args)
    reward = reward or standins.FirstWord(tmp_path / f"{name}_rewards.jsonl")
    worker = standins.worker(
        path,
        tokenizer,
        dataset,
        reward,
        args,
        tmp_path / f"{name}_weights",
        max_inflight_tasks=in_flight,
        delay_seed=delay_seed,
    )
    kgps = KGPSCallback(config, selector=selector, drop_zero_advantage=drop)
    log = EngineLog(kgps)
    trainer = async_grpo.AsyncGRPOTrainer(
        model=path, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tokenizer,
        callbacks=[kgps, log], rollout_worker=worker,
        weight_transfer=standins.FileWeightTransfer(tmp_path / f"{name}_weights"),
    )  # fmt: skip
    trainer.train(resume_from_checkpoint=resume)
    return trainer, kgps, log, dataset, tmp_path / f"{name}_rewards.jsonl"


def groups_scored_by_the_worker(path):
    """(dataset index, successes) of every group the reward function scored, in the worker's process."""
    with open(path) as f:
        records = [json.loads(line) for line in f]
    return [(r["idx"], int(sum(x == 1.0 for x in r["rewards"]))) for r in records]


@supported
def test_deterministic_run_the_state_is_a_replay_of_the_groups_it_observed(tmp_path):
    trainer, kgps, log, dataset, rewards = train(tmp_path, max_steps=6)

    # The selector's state is exactly what the logged choices, outcomes and norms make of a fresh one.
    assert_same_state(snapshot(kgps.engine), snapshot(replay(fresh_engine("kgps", dataset), log.ops)))
    # Those outcomes are the rewards the reward function gave those prompts, in the worker's process.
    fed = collections.Counter((int(i), int(s)) for op in log.ops if op[0] == "observe" for i, s in zip(op[1], op[2]))
    scored = collections.Counter(groups_scored_by_the_worker(rewards))
    assert fed and not fed - scored
    # The groups scored and not fed are those of the batches still in flight when training ended.
    in_flight = kgps.adapter.service.in_flight.values()
    assert sum((scored - fed).values()) == sum(r is not None for batch in in_flight for r in batch.rewards)
    assert all((op[3] == G).all() for op in log.ops if op[0] == "observe")
    # One norm a weight sync (every step), widening beliefs once the warmup (none) is over.
    assert sum(op[0] == "predict" for op in log.ops) == 6
    # The stand-in attention is the real kernel's computation: the first step is on-policy, its ratio exactly 1.
    assert trainer.state.log_history[0]["ratio"] == pytest.approx(1.0, abs=1e-6)
    logged = {key for entry in trainer.state.log_history for key in entry}
    assert {"kgps/mae", "kgps/delta_norm", "kgps/process_noise", "kgps/version_lag", "kgps/coverage"} <= logged
    # The model card gets its KGPS section, with this run's rounds.
    trainer.create_model_card()
    card = (Path(trainer.args.output_dir) / "README.md").read_text()
    assert "## KGPS" in card and f"{kgps.ledger.batches_scored}" in card


@supported
def test_a_second_train_on_other_rows_is_refused_before_anything_changes(tmp_path):
    trainer, kgps, _, dataset, _ = train(tmp_path, max_steps=2)
    before = snapshot(kgps.engine)
    # the same rows in another order: every belief would go to another prompt
    trainer.train_dataset = dataset.select(range(len(dataset) - 1, -1, -1))
    with pytest.raises(
        ValueError, match=r"replaced by other rows \(\d+, where the first train\(\) had \d+\).*new AsyncGRPOTrainer"
    ):
        trainer.train()
    assert_same_state(snapshot(kgps.engine), before)


@supported
def test_process_noise_comes_from_the_norm_between_the_versions_the_worker_is_sent(tmp_path):
    """With a weight sync every 2 steps, one prediction per sync, from the norm between the weights of consecutive
    versions: the oracle is the files the transfer stand-in wrote, one per version."""
    from safetensors.torch import load_file

    _, _, log, _, _ = train(tmp_path, max_steps=4, weight_sync_steps=2)
    weights = [load_file(tmp_path / "run_weights" / f"v{v}.safetensors") for v in (1, 2, 3)]
    oracle = [
        sum(float(((new[name].double() - old[name].double()) ** 2).sum()) for name in new) ** 0.5
        for old, new in zip(weights, weights[1:])
    ]
    predicted = [op[1] for op in log.ops if op[0] == "predict"]
    np.testing.assert_allclose(predicted, oracle, rtol=1e-6)
    assert min(oracle) > 0


@supported
@pytest.mark.parametrize("selector", SELECTORS)
def test_threaded_run_groups_finish_out_of_order_and_none_is_lost_or_counted_twice(tmp_path, selector):
    trainer, kgps, log, dataset, rewards = train(tmp_path, selector=selector, delay_seed=0, in_flight=4 * G)

    handed = [i for batch in log.handed for i in batch]
    groups = groups_scored_by_the_worker(rewards)
    scored = [i for i, _ in groups]
    assert scored != handed[: len(scored)]  # out of order
    assert collections.Counter(scored) <= collections.Counter(handed)
    ledger = kgps.ledger
    chosen = [op[1] for op in log.ops if op[0] == "choose"]
    fed = [tuple(op[1]) for op in log.ops if op[0] == "observe"]
    assert len(fed) == ledger.batches_scored > 0
    # A batch is fed at most as often as it was chosen (thread timing may choose the same prompts twice).
    assert collections.Counter(fed) <= collections.Counter(tuple(batch) for batch in chosen)
    # Every group the worker scored is counted exactly once: fed with its outcome, or held in a batch in flight.
    outcomes = collections.Counter((int(i), int(s)) for op in log.ops if op[0] == "observe" for i, s in zip(*op[1:3]))
    waiting = collections.Counter(
        int(flight.indices[position])
        for flight in kgps.adapter.service.in_flight.values()
        for position, reward in enumerate(flight.rewards)
        if reward is not None
    )
    assert not outcomes - collections.Counter(groups)
    assert collections.Counter(i for i, _ in outcomes.elements()) + waiting == collections.Counter(scored)
    assert ledger.batches_chosen == len(chosen) and ledger.times_selected.sum() == len(chosen) * B
    assert len(ledger.pending) == len(chosen) - len(fed) == len(kgps.adapter.service.in_flight)
    assert kgps.rollouts == len(fed) * B * G
    assert kgps.adapter.service.error is None
    assert_same_state(snapshot(kgps.engine), snapshot(replay(fresh_engine(selector, dataset), log.ops)))


@supported
def test_groups_whose_samples_the_trainer_drops_as_stale_still_reach_the_selector(tmp_path):
    """With `max_staleness=0` the trainer drops every sample of an older version; KGPS counts every group the worker
    scored all the same: those fed to the selector and those of batches still in flight are all of them."""
    trainer, kgps, log, _, rewards = train(tmp_path, delay_seed=0, in_flight=4 * G, max_staleness=0, max_steps=6)
    dropped = sum(entry.get("sample/dropped_stale_total", 0) for entry in trainer.state.log_history)
    assert dropped > 0
    fed = sum(len(op[1]) for op in log.ops if op[0] == "observe")
    in_flight = sum(r is not None for batch in kgps.adapter.service.in_flight.values() for r in batch.rewards)
    assert fed + in_flight == len(groups_scored_by_the_worker(rewards))


@supported
def test_groups_of_zero_advantage_never_reach_the_optimizer_and_still_reach_the_selector(tmp_path, monkeypatch):
    """With `drop_zero_advantage`, no token the optimizer trains on has zero advantage (without it, many do: most
    groups of this task are unanimous), every group the worker scored still reaches KGPS, and the share dropped is
    logged."""
    trained = []
    compute_loss = async_grpo.AsyncGRPOTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        trained.append(inputs["advantages"][inputs["token_index"] >= 0].detach().abs().clone())
        return compute_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(async_grpo.AsyncGRPOTrainer, "compute_loss", spy)
    train(tmp_path, max_steps=4, name="kept")
    kept, trained[:] = torch.cat(trained), []
    assert (kept < 1e-6).float().mean() > 0.2, "too few groups of zero advantage to tell"

    trainer, kgps, log, _, rewards = train(tmp_path, max_steps=4, name="dropped", drop=True)
    assert len(trained) == 4 and (torch.cat(trained) > 1e-6).all()
    fed = sum(len(op[1]) for op in log.ops if op[0] == "observe")
    in_flight = sum(r is not None for batch in kgps.adapter.service.in_flight.values() for r in batch.rewards)
    scored = groups_scored_by_the_worker(rewards)
    assert fed + in_flight == len(scored)
    unanimous = sum(s in (0, G) for _, s in scored)
    shares = [
        entry["kgps/zero_advantage_dropped"]
        for entry in trainer.state.log_history
        if "kgps/zero_advantage_dropped" in entry
    ]
    assert unanimous > 0 and shares and 0 < max(shares) <= 1


@contextlib.contextmanager
def ends_within(seconds):
    """Fails the test instead of hanging it when its block runs past `seconds` (the main thread's alarm)."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@supported
@pytest.mark.parametrize("value, last", [(1.0, "completions all got 1"), (None, "rewards were all None")])
def test_dropping_groups_when_none_can_have_a_gradient_ends_training_with_the_cause(tmp_path, value, last):
    """Every reward equal (or None): every group is dropped, and the worker would generate on at step 0 forever. After
    `MAX_DROPPED_BATCHES` batches' worth of groups in a row, training ends, within seconds, saying why."""
    start = time.monotonic()
    message = (
        r"drop_zero_advantage=True\) dropped the last 20 groups the rollout worker scored \(10 generation batches"
    )
    with ends_within(150), pytest.raises(RuntimeError, match=message) as error:
        train(tmp_path, drop=True, reward=standins.Constant(value), max_steps=2)
    assert last in str(error.value) and "leave drop_zero_advantage unset" in str(error.value)
    assert time.monotonic() - start < 90


@supported
def test_an_infinite_reward_ends_training_promptly_naming_the_reward_function(tmp_path):
    start = time.monotonic()
    with ends_within(150), pytest.raises(RuntimeError, match="The reward function 'constant' returned inf"):
        train(tmp_path, reward=standins.Constant(float("inf")), max_steps=2)
    assert time.monotonic() - start < 90


@supported
def test_dropping_groups_of_one_completion_is_refused_when_the_trainer_is_built(tmp_path):
    message = r"drop_zero_advantage=True\) with num_generations=1: .* Set num_generations to 2 or more"
    with ends_within(150), pytest.raises(ValueError, match=message):  # before, accepted: step 0 forever
        train(tmp_path, drop=True, num_generations=1, per_device_train_batch_size=2)


@supported
def test_a_streamed_dataset_is_refused_when_the_trainer_is_built_saying_why_and_what_to_do(tmp_path):
    from test_grpo import STREAMED

    path, tokenizer, dataset = standins.setup(tmp_path)
    args = standins.config(tmp_path / "run")
    reward = standins.FirstWord(tmp_path / "rewards.jsonl")
    worker = standins.worker(path, tokenizer, dataset, reward, args, tmp_path / "w", max_inflight_tasks=G)
    with pytest.raises(ValueError, match=STREAMED):
        async_grpo.AsyncGRPOTrainer(
            model=path, reward_funcs=[reward], args=args, train_dataset=dataset.to_iterable_dataset(),
            processing_class=tokenizer, callbacks=[KGPSCallback()], rollout_worker=worker,
            weight_transfer=standins.FileWeightTransfer(tmp_path / "w"),
        )  # fmt: skip
    assert worker._process is None  # never started


def saved_state(directory, engine):
    path = os.path.join(directory, _state_file.STATE_FILE)
    selector_state, rounds_state = _state_file.read_run(path, *_state_file.load(path), engine.selector, B)
    return selector_state, rounds_state


@supported
@pytest.mark.parametrize("selector, drop", [(selector, False) for selector in SELECTORS] + [("kgps", True)])
def test_resume_restores_the_state_saved_and_hands_out_its_pending_batches_first(tmp_path, selector, drop):
    save = dict(max_steps=4, save_strategy="steps", save_steps=2, drop=drop)
    _, straight, straight_log, dataset, _ = train(tmp_path, selector=selector, **save)
    checkpoint = tmp_path / "run" / "checkpoint-2"
    _, resumed, resumed_log, _, _ = train(tmp_path, selector=selector, resume=str(checkpoint), name="resumed", **save)

    saved = saved_state(checkpoint, resumed.engine)
    # The file holds the uninterrupted run's engine exactly as it was after some prefix of its operations.
    engine = fresh_engine(selector, dataset)
    states = [copy.deepcopy(snapshot(engine))]
    states += [copy.deepcopy(snapshot(replay(engine, [op]))) for op in straight_log.ops]
    assert any(same_state(state, saved) for state in states), "not a state the uninterrupted run went through"
    # The resumed run starts from that state, bit for bit (random generators and counters included) ...
    assert_same_state(resumed_log.loaded, saved)
    # ... hands the worker the batches pending at the checkpoint first ...
    # (all of them, unless the run reached max_steps before the worker asked for the last: a slow machine)
    pending = saved[1]["pending"].tolist()
    handed = resumed_log.handed[: len(pending)]
    assert handed and handed == pending[: len(handed)]
    # ... and continues from there: its state is the saved one fed its own operations.
    restored = fresh_engine(selector, dataset)
    restored.selector.load_state_dict(saved[0])
    restored.ledger.load_state_dict(saved[1])
    assert_same_state(snapshot(resumed.engine), snapshot(replay(restored, resumed_log.ops)))
    # TRL's own rollout state carries the model version across the resume.
    with open(checkpoint / "rollout_state.json") as f:
        assert json.load(f)["model_version"] == 3  # the cold sync, then one a step


def build_trainer(tmp_path):
    path, tokenizer, dataset = standins.setup(tmp_path)
    args = standins.config(tmp_path / "run")
    reward = standins.FirstWord(tmp_path / "rewards.jsonl")
    return async_grpo.AsyncGRPOTrainer(
        model=path, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tokenizer,
        callbacks=[KGPSCallback()], rollout_worker=standins.worker(
            path, tokenizer, dataset, reward, args, tmp_path / "w", max_inflight_tasks=G
        ), weight_transfer=standins.FileWeightTransfer(tmp_path / "w"),
    )  # fmt: skip


@supported
def test_another_trl_release_is_accepted_when_what_kgps_relies_on_holds(tmp_path, monkeypatch):
    # No version pin and no hash of TRL's source: a release whose members keep their signatures and calls is driven.
    import trl

    monkeypatch.setattr(trl, "__version__", "1.17.0")
    trainer = build_trainer(tmp_path)
    assert any(isinstance(c, KGPSCallback) and c.trainer is trainer for c in trainer.callback_handler.callbacks)


async def _score_two(self, group, weights):
    return []


def _generate_without_the_iterator(self, stop_event):
    return None


def _iterate(self, start):
    yield from ()


@supported
@pytest.mark.parametrize(
    "member, replacement, message",
    [
        (
            "_score_group",
            _score_two,
            r"`_AsyncRolloutLoop\._score_group` \(wrapped: each group's rewards reach KGPS .*\) "
            r"has changed: it takes \(group, weights\), where KGPS relies on \(group\)",
        ),
        ("_repeat_iterator", _iterate, r"`_AsyncRolloutLoop\._repeat_iterator` .* it takes \(start\)"),
        (
            "_generate_loop",
            _generate_without_the_iterator,
            r"`_AsyncRolloutLoop\._generate_loop` .* has changed: its code "
            r"no longer names _repeat_iterator",
        ),
        ("_repeat_iterator", None, r"`_AsyncRolloutLoop\._repeat_iterator` .* has changed: it is missing"),
    ],
    ids=["signature", "parameters", "behaviour", "missing"],
)
def test_a_changed_private_member_is_refused_naming_it_and_how(tmp_path, monkeypatch, member, replacement, message):
    loop = _async_trl.find("_AsyncRolloutLoop")
    if replacement is None:
        monkeypatch.delattr(loop, member)
    else:
        monkeypatch.setattr(loop, member, replacement)
    with pytest.raises(RuntimeError, match=message):
        build_trainer(tmp_path)


@supported
def test_bad_input_is_refused_before_the_worker_starts(tmp_path):
    path, tokenizer, dataset = standins.setup(tmp_path)
    args = standins.config(tmp_path / "run")
    reward = standins.FirstWord(tmp_path / "rewards.jsonl")

    def trainer(config, worker):
        return async_grpo.AsyncGRPOTrainer(
            model=path, reward_funcs=[reward], args=args, train_dataset=dataset, processing_class=tokenizer,
            callbacks=[KGPSCallback(config)], rollout_worker=worker,
            weight_transfer=standins.FileWeightTransfer(tmp_path / "w"),
        )  # fmt: skip

    worker = standins.worker(path, tokenizer, dataset, reward, args, tmp_path / "w", max_inflight_tasks=G)
    with pytest.raises(ValueError, match=r"feature_columns names \['difficulty'\]"):
        trainer(KGPSConfig(feature_columns=["difficulty"]), worker).train()
    assert worker._process is None  # never started

    class OwnWorker:  # TRL's protocol, but not TRL's worker: KGPS has no loop to read from
        rollout_buffer = metrics_queue = None

        def start(self): ...
        def stop(self): ...
        def update_model_version(self, version): ...
        def check_health(self, stale_after_s): ...

    with pytest.raises(TypeError, match="rollout_worker is a OwnWorker"):
        trainer(KGPSConfig(), OwnWorker()).train()


@supported
def test_the_example_trains_with_the_worker_trl_builds(tmp_path, monkeypatch):
    """`examples/async_grpo_math.py` as a user runs it, one line of KGPS: TRL builds its own worker and transfer
    (into which the stand-ins go), KGPS adapts them."""
    import runpy

    from datasets import Dataset

    standins.install(monkeypatch, weights_dir=tmp_path / "weights")
    path, _, _ = standins.setup(tmp_path)
    data = tmp_path / "math"
    for split, size in (("train", 8), ("test", 2)):
        rows = [
            {"problem": f"p{i} a b", "solution": f"\\boxed{{{i}}}", "level": f"Level {i % 3}"} for i in range(size)
        ]
        rows = [{**row, "type": "Algebra"} for row in rows]
        Dataset.from_list(rows).to_json(data / f"{split}.jsonl")
    example = runpy.run_path(str(Path(__file__).parents[2] / "examples" / "async_grpo_math.py"))
    arguments = example["make_parser"]().parse_args_and_config(
        ["--model_name_or_path", path, "--dataset_name", str(data), "--output_dir", str(tmp_path / "out")]
        + ["--use_cpu", "true", "--bf16", "false", "--report_to", "none", "--max_steps", "2", "--save_steps", "2"]
        + ["--per_device_train_batch_size", "8", "--num_generations", "4", "--max_completion_length", "3"]
        + ["--token_budget", "0", "--gradient_checkpointing", "false", "--logging_steps", "1"]
        + ["--disable_tqdm", "true", "--selector", "kgps"]
    )
    assert type(arguments[1]).__name__ == "AsyncGRPOConfig" and arguments[2].feature_columns == ["level", "type"]
    example["main"](*arguments)

    _, meta = _state_file.load(str(tmp_path / "out" / "checkpoint-2" / _state_file.STATE_FILE))
    assert (meta["selector_class"], meta["num_prompts"]) == ("KGPSSelector", 8)
    with open(tmp_path / "out" / "checkpoint-2" / "trainer_state.json") as f:
        logged = {key for entry in json.load(f)["log_history"] for key in entry}
    assert {"kgps/coverage", "kgps/delta_norm", "kgps/version_lag"} <= logged
    assert (tmp_path / "out" / "model.safetensors").is_file()


def grpo_trainer(tmp_path, config, selector, max_steps, resume=None, **args):
    """`GRPOTrainer` on the asynchronous tests' model and dataset, 2 groups of 4 a generation batch."""
    import trl
    from harness import SpyKGPS

    path, tokenizer, dataset = standins.setup(tmp_path)
    kgps = SpyKGPS(config, selector=selector)
    trainer = trl.GRPOTrainer(
        model=path,
        reward_funcs=standins.FirstWord(tmp_path / "grpo_rewards.jsonl"),
        args=tiny_args(tmp_path / "grpo", max_steps=max_steps, **args),
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer, kgps


def tiny_args(output_dir, **overrides):
    from trl_kgps.tasks import tiny

    return tiny.grpo_config(output_dir, max_completion_length=3, **overrides)


@supported
def test_the_warmup_of_the_callbacks_config_runs_under_both_trainers(tmp_path):
    # The paper's preset warms up one uniform epoch, with MoPPS too: 12 batches of 2 cover the 24 prompts once, then
    # MoPPS chooses. The same config and selector give the same warmup under GRPOTrainer and AsyncGRPOTrainer.
    config = KGPSConfig.paper(delta_norm_sample=1.0)
    _, kgps, log, dataset, _ = train(tmp_path / "async", selector="mopps", config=config, max_steps=12)
    _, spy = grpo_trainer(tmp_path / "sync", config, "mopps", max_steps=12)
    for ledger, warmup in ((kgps.ledger, log.handed[:12]), (spy.ledger, spy.batches[:12])):
        assert ledger.warmup_batches == 12
        assert sorted(np.concatenate(warmup).tolist()) == list(range(len(dataset)))


@supported
def test_a_checkpoint_of_one_trainer_resumed_by_the_other_is_refused_naming_the_trainer_it_came_from(tmp_path):
    save = dict(save_strategy="steps", save_steps=2)
    train(tmp_path / "async", max_steps=2, **save)
    with pytest.raises(ValueError, match=r"was saved by AsyncGRPOTrainer, and this run is GRPOTrainer \(or RLOO"):
        grpo_trainer(tmp_path / "sync", CONFIG, "kgps", 4, resume=str(tmp_path / "async" / "run" / "checkpoint-2"))
    grpo_trainer(tmp_path / "sync", CONFIG, "kgps", 2, **save)
    with pytest.raises(ValueError, match=r"was saved by GRPOTrainer \(or RLOOTrainer\), and this run is AsyncGRPO"):
        train(tmp_path / "async", max_steps=4, name="resumed", resume=str(tmp_path / "sync" / "grpo" / "checkpoint-2"))


@supported
def test_a_batch_larger_than_the_dataset_is_refused_with_the_async_trainers_formula(tmp_path):
    with pytest.raises(ValueError, match=r"needs 26 distinct prompts \(per_device_train_batch_size x gradient_accum"):
        train(tmp_path, max_steps=1, gradient_accumulation_steps=13)


@supported
def test_rows_with_one_prompt_that_differ_in_a_column_the_reward_reads_are_all_handed_out(tmp_path, monkeypatch):
    # 24 rows over 12 prompt texts; the reward reads `idx`, so each row is its own prompt (its rewards are its own)
    setup = standins.setup

    def repeated(directory, num_prompts=24):
        path, tokenizer, dataset = setup(directory, num_prompts)
        text = [[{"role": "user", "content": f"p{i % 12} a b"}] for i in range(num_prompts)]
        return path, tokenizer, dataset.remove_columns("prompt").add_column("prompt", text)

    monkeypatch.setattr(standins, "setup", repeated)
    _, kgps, log, _, rewards = train(tmp_path, selector="uniform", max_steps=12)
    assert kgps.engine.selector.num_prompts == 24
    assert {i for batch in log.handed for i in batch} == set(range(24)), "TRL's order: every row within an epoch"
    _, kgps, log, _, _ = train(tmp_path, max_steps=6, name="kgps")
    assert kgps.engine.selector.num_prompts == 24
