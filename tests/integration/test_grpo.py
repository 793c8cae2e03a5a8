"""KGPS inside the real GRPOTrainer on a tiny model: attribution, the filter's state, lag, attaching."""

import dataclasses
import logging
import warnings

import numpy as np
import pytest
import torch
from harness import FaultyReward, NormLog, RewardLog, prompt_dataset, replay, train, trainer_args

from trl_kgps import KGPSCallback, KGPSConfig, KGPSSelector


trl = pytest.importorskip("trl")

# The default with the exact norm: these tests compare the filter with a reference fed the exact norms (the sampled
# norm's error is measured in tests/distributed/ and tests/unit/test_delta_norm.py).
DEFAULT = KGPSConfig(delta_norm_sample=1.0, feature_columns=[])  # the shared filter, as the reference builds it


@pytest.mark.parametrize("config", [KGPSConfig.paper(), DEFAULT], ids=["paper", "default"])
@pytest.mark.parametrize(
    "args, lag",
    [
        (dict(max_steps=24), 1),  # steps_per_generation = gradient_accumulation_steps: one batch prefetched
        (dict(max_steps=24, steps_per_generation=2), 0),  # the next batch is drawn after this one is scored
        (dict(max_steps=24, dataloader_num_workers=1, dataloader_prefetch_factor=1), 2),
    ],
    ids=["lag1", "lag0", "lag2-workers"],
)
def test_selector_state_equals_a_reference_filter_fed_the_same_rewards(tmp_path, model, tokenizer, args, lag, config):
    """The paper's reference is Algorithm 1 written apart (tests/unit/reference.py checks the vectorised filter
    against it); the default's is a standalone `KGPSSelector` fed the logged rewards, whose updates
    tests/unit/test_default_selector.py checks against scipy."""
    trainer, kgps, events = train(tmp_path, model, tokenizer, config=config, **args)
    sampler = kgps.sampler
    assert kgps.selector is sampler.selector and isinstance(kgps.selector, KGPSSelector)
    scored = [e for e in events if e[0] == "scored"]
    assert len(scored) > sampler.ledger.warmup_batches, "the run never left warmup"

    reference = replay(events, 16, sampler.ledger.warmup_batches, config)
    np.testing.assert_allclose(kgps.selector.mean, reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)

    assert max(kgps.lags[sampler.ledger.warmup_batches :]) == lag


def test_every_scored_completion_is_attributed_to_its_dataset_index(tmp_path, model, tokenizer):
    chosen = []
    _, kgps, events = train(tmp_path, model, tokenizer, max_steps=16, config=KGPSConfig.paper())
    # The reward function received the dataset's own "idx" column: each group of 4 completions is one prompt,
    # and the groups, in order, are the batches the sampler chose.
    scored = [np.asarray(e[1]) for e in events if e[0] == "scored"]
    for idx in scored:
        groups = idx.reshape(-1, 4)
        assert (groups == groups[:, :1]).all()
        chosen.append(groups[:, 0])
    assert np.array_equal(np.sort(np.concatenate(chosen[:8])), np.arange(16)), "warmup is one epoch over all prompts"


@pytest.mark.parametrize("config", [KGPSConfig.paper(), DEFAULT], ids=["paper", "default"])
def test_pending_prompts_are_never_selected(tmp_path, model, tokenizer, config):
    _, kgps, _ = train(tmp_path, model, tokenizer, max_steps=30, dataloader_num_workers=1, config=config)
    # A batch chosen while `lag` batches await their rewards (the `lag` chosen just before it) shares no prompt
    # with them. At an epoch's start the trainer has scored everything (lag 0), and a prompt may come back at once.
    assert max(kgps.lags) >= 2
    for i, (batch, lag) in enumerate(zip(kgps.batches, kgps.lags)):
        if i >= kgps.ledger.warmup_batches:
            pending = kgps.batches[i - lag : i]
            assert not set(batch) & set().union(*pending), (i, batch, pending)


@pytest.mark.parametrize("config", [KGPSConfig.paper(), DEFAULT], ids=["paper", "default"])
def test_metrics_reach_the_trainer_logs(tmp_path, model, tokenizer, config):
    trainer, _, _ = train(tmp_path, model, tokenizer, max_steps=20, config=config)
    logged = set().union(*(entry.keys() for entry in trainer.state.log_history))
    for key in (
        "kgps/mae",
        "kgps/informative",
        "kgps/coverage",
        "kgps/lag",
        "kgps/delta_norm",
        "kgps/process_noise",
        "kgps/nis",
        "kgps/repeats",
        "kgps/unique_prompts",
    ):
        assert key in logged, key
    coverage = [entry["kgps/coverage"] for entry in trainer.state.log_history if "kgps/coverage" in entry]
    assert np.all(np.diff(coverage) >= 0) and coverage[-1] == (1.0 if config.warmup_epochs else coverage[-1])
    unique = [entry["kgps/unique_prompts"] for entry in trainer.state.log_history if "kgps/unique_prompts" in entry]
    assert 0 < max(unique) <= 16


def test_explicit_attach_is_equivalent(tmp_path, model, tokenizer):
    events = []
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=RewardLog(events=events),
        args=trainer_args(tmp_path, max_steps=12),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
    )
    kgps = KGPSCallback(KGPSConfig(), trainer=trainer)
    trainer.add_callback(kgps)
    trainer.train()
    assert kgps.trainer is trainer and kgps.ledger.batches_chosen >= 12


def test_attached_but_not_added_fails_with_the_fix(tmp_path, model, tokenizer):
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=RewardLog(),
        args=trainer_args(tmp_path, max_steps=2),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
    )
    KGPSCallback(trainer=trainer)
    with pytest.raises(RuntimeError, match="add_callback"):
        trainer.train()


def test_a_trainer_that_is_not_grpo_like_is_refused(tmp_path, model, tokenizer):
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    with pytest.raises(TypeError, match="GRPOTrainer"):
        Trainer(model=model, args=args, callbacks=[KGPSCallback()])


STREAMED = (
    r"KGPS needs a map-style train dataset, and this one is a datasets\.iterable_dataset\.IterableDataset, a stream: "
    r"KGPS chooses each generation batch's prompts by their index in the dataset, and a stream has no index .* Load the "
    r"dataset without `streaming=True`, or make the stream map-style before training: `Dataset\.from_generator"
)


def test_a_streamed_dataset_is_refused_when_the_trainer_is_built_saying_why_and_what_to_do(tmp_path, model, tokenizer):
    # `datasets.IterableDataset` (load_dataset(..., streaming=True), to_iterable_dataset()) is no torch IterableDataset:
    # it is refused for having no length. TRL < 1.9 refuses it itself (NotImplementedError) before any callback attaches.
    from packaging.version import Version

    stream = prompt_dataset(16).to_iterable_dataset()
    old_trl = Version(trl.__version__) < Version("1.9")
    with pytest.raises(NotImplementedError if old_trl else ValueError, match=None if old_trl else STREAMED):
        trl.GRPOTrainer(
            model=model,
            reward_funcs=RewardLog(),
            args=trainer_args(tmp_path, max_steps=2),
            train_dataset=stream,
            processing_class=tokenizer,
            callbacks=[KGPSCallback()],
        )


@pytest.mark.parametrize(
    "rows, args, message",
    [
        (
            prompt_dataset(16).select([]),
            {},
            r"^The train dataset has no rows, and KGPS chooses the prompts of each generation batch among its rows",
        ),
        (
            prompt_dataset(16).add_column("kgps_index", list(range(16))),
            {},
            r"^The train dataset has a column named 'kgps_index', the name under which KGPS adds each row's dataset "
            r"index .* Rename the column",
        ),
        (
            prompt_dataset(16),
            {"per_device_train_batch_size": 0},
            r"^per_device_train_batch_size=0 puts no prompt in a generation batch \(KGPS chooses "
            r"per_device_train_batch_size x processes x steps_per_generation / num_generations prompts for each\): set",
        ),
    ],
    ids=["empty", "kgps_index_column", "no_prompt_per_batch"],
)
def test_a_dataset_or_batch_kgps_cannot_choose_from_is_refused_when_the_trainer_is_built(
    tmp_path, model, tokenizer, rows, args, message
):
    # Before: an empty dataset gave "num_prompts must be a positive integer" at train(); a `kgps_index` column was
    # replaced by the index without a word; per_device_train_batch_size=0 gave "needs 0 distinct prompts" at train().
    kgps = KGPSCallback()
    with pytest.raises(ValueError, match=message):
        trl.GRPOTrainer(
            model=model,
            reward_funcs=RewardLog(),
            args=trainer_args(tmp_path, max_steps=2, **args),
            train_dataset=rows,
            processing_class=tokenizer,
            callbacks=[kgps],
        )
    assert kgps.engine is None


def test_drop_zero_advantage_set_after_the_trainer_is_built_is_refused_before_it_changes(tmp_path, model, tokenizer):
    kgps = KGPSCallback()
    trl.GRPOTrainer(
        model=model,
        reward_funcs=RewardLog(),
        args=trainer_args(tmp_path, max_steps=2),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    with pytest.raises(
        AttributeError, match=r"drop_zero_advantage=True was set after the trainer was built .* Pass it"
    ):
        kgps.drop_zero_advantage = True
    assert kgps.drop_zero_advantage is False
    kgps.drop_zero_advantage = False  # the value it holds: nothing changes


def test_rewards_are_attributed_by_dataset_index_with_duplicate_prompt_texts(tmp_path, model, tokenizer):
    """Four prompt texts over 16 rows, each row with its own success rate, one belief per row (`prompt_key=None`):
    attribution by text could not tell rows apart; by index, the selector's state equals the reference fed each row's
    own rewards."""
    events = []
    rows = prompt_dataset(16)
    rows = rows.map(lambda row: {"prompt": f"p{row['idx'] % 4} a b"}).shuffle(seed=1)  # idx no longer = position
    reward = RewardLog(events=events)
    by_position = np.asarray(rows["idx"])
    kgps = KGPSCallback(dataclasses.replace(DEFAULT, prompt_key=None))
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=trainer_args(tmp_path, max_steps=12),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[NormLog(events), kgps],
    )
    trainer.train()
    # RewardLog logs the `idx` column; the selector numbers prompts by position in the (shuffled) dataset.
    position = {int(idx): i for i, idx in enumerate(by_position)}
    logged = [(e[0], [position[i] for i in e[1]], e[2]) if e[0] == "scored" else e for e in events]
    reference = replay(logged, 16, kgps.ledger.warmup_batches, DEFAULT)
    np.testing.assert_allclose(kgps.selector.mean, reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)
    assert len(set(rows["prompt"])) == 4 and kgps.ledger.batches_scored == 12
    assert trainer.train_dataset is rows, "the user's dataset is left as it was"


class ProblemReward:
    """A deterministic-per-seed 0/1 reward that reads each row's `problem` alone: copies of a problem earn alike."""

    __name__ = "problem_reward"

    def __init__(self, events, seed=0):
        self.rng = np.random.default_rng(seed)
        self.events = events
        self.base = self.rng.uniform(0.1, 0.9, 6)

    def __call__(self, prompts, completions, problem, **kwargs):
        rewards = [float(self.rng.uniform() < self.base[int(p[3:])]) for p in problem]
        self.events.append(("scored", None, rewards))
        return rewards


class RowProbe(trl.GRPOTrainer):
    """The real `GRPOTrainer`, recording the `idx` of every row it generates for."""

    rows_seen: list

    def _generate_and_score_completions(self, inputs):
        self.rows_seen.append([int(x["idx"]) for x in inputs])
        return super()._generate_and_score_completions(inputs)


@pytest.mark.parametrize("key", ["prompt", "problem"])
def test_copies_of_a_prompt_share_one_belief_never_one_batch_and_train_every_row(
    tmp_path, model, tokenizer, key, caplog
):
    """Six prompts, each on 3 or 4 shuffled rows, by their text or by an id column, with a reward that reads the id:
    the selector tracks the six; a batch holds six distinct prompts (B = 6), each prompt's rows in turn, so that every
    row trains; every copy's rewards reach its prompt's one belief, which equals the reference fed the rewards by
    prompt; the table and the log count the copies."""
    events = []
    rows = prompt_dataset(22)
    problem = [i % 6 for i in range(22)]
    rows = rows.add_column("problem", [f"id-{p}" for p in problem])
    if key == "prompt":
        rows = rows.map(lambda row, i: {"prompt": f"p{problem[i]} a b"}, with_indices=True)
    rows = rows.shuffle(seed=1)
    prompt_of_row = {}  # the prompts numbered by their first row, as the callback numbers them
    for value in rows[key]:
        prompt_of_row.setdefault(value, len(prompt_of_row))
    prompt = np.array([prompt_of_row[value] for value in rows[key]])
    position = {int(idx): i for i, idx in enumerate(rows["idx"])}
    kgps = KGPSCallback(dataclasses.replace(DEFAULT, prompt_key=key))
    trainer = RowProbe(
        model=model,
        reward_funcs=ProblemReward(events),
        args=trainer_args(tmp_path, max_steps=8, per_device_train_batch_size=24, num_generations=4),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[NormLog(events), kgps],
    )
    trainer.rows_seen = []
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        trainer.train()
    assert kgps.selector.num_prompts == 6 and kgps.ledger.batches_scored == 8
    rows_of = [np.flatnonzero(prompt == p) for p in range(6)]
    seen = [[position[i] for i in batch] for batch in trainer.rows_seen]
    for turn, batch in enumerate(seen):  # batch t: the six prompts, G rows each, each prompt's row t (mod its rows)
        assert sorted(set(batch)) == sorted(int(r[turn % r.size]) for r in rows_of)
    assert set(np.concatenate(seen).tolist()) == set(range(22)), "every row trained"
    scored = iter(seen)
    logged = [("scored", prompt[next(scored)].tolist(), e[2]) if e[0] == "scored" else e for e in events]
    reference = replay(logged, 6, kgps.ledger.warmup_batches, DEFAULT)
    np.testing.assert_allclose(kgps.selector.mean, reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)
    table = kgps.difficulty_table()
    first_row = [int(r[0]) for r in rows_of]
    assert table["index"] == first_row and table["rows"] == [int(r.size) for r in rows_of]
    assert table["prompt"] == [rows["prompt"][r] for r in first_row]
    identity = "'prompt' and 'problem'" if key == "prompt" else "'problem'"
    assert f"22 rows hold 6 distinct prompts (rows with equal {identity}; 16 rows repeat" in caplog.text


def test_a_trl_whose_hook_signature_changed_is_refused_naming_the_version_before_anything_changes(
    tmp_path, model, tokenizer
):
    class ChangedTrainer(trl.GRPOTrainer):
        def _calculate_rewards(self, batch, prompts, completions, completion_ids_list):  # renamed first parameter
            return super()._calculate_rewards(batch, prompts, completions, completion_ids_list)

    trainer = ChangedTrainer(
        model=model,
        reward_funcs=RewardLog(),
        args=trainer_args(tmp_path, max_steps=2),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
    )
    kgps = KGPSCallback()
    with pytest.raises(TypeError, match=rf"_calculate_rewards\(inputs, .*TRL {trl.__version__}.*is tested with TRL"):
        kgps.attach(trainer)
    assert (
        kgps.trainer is None
        and "_calculate_rewards" not in vars(trainer)
        and "_get_train_sampler" not in vars(trainer)
    )


def test_metrics_that_stop_reaching_the_logs_give_one_warning(tmp_path, model, tokenizer):
    class NoMergeTrainer(trl.GRPOTrainer):
        def log(self, logs, start_time=None):  # a TRL whose log() no longer reads `_metrics`
            self._metrics["train"].clear()
            super(trl.GRPOTrainer, self).log(logs, start_time)

    trainer = NoMergeTrainer(
        model=model,
        reward_funcs=RewardLog(),
        args=trainer_args(tmp_path, max_steps=6),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
        callbacks=[KGPSCallback()],
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    ours = [w for w in caught if "do not reach the trainer's logs" in str(w.message)]
    assert len(ours) == 1 and trl.__version__ in str(ours[0].message)


@pytest.mark.parametrize(
    "argument, message",
    [
        # it would drop the index column by which KGPS attributes rewards
        (dict(remove_unused_columns=True), r"set remove_unused_columns=False"),
        # KGPS chooses the order of the prompts, whatever the trainer is told
        (dict(shuffle_dataset=False), r"shuffle_dataset=False .* KGPS chooses the order of the prompts"),
    ],
)
def test_a_trainer_argument_kgps_cannot_honour_is_refused_with_the_reason(
    tmp_path, model, tokenizer, argument, message
):
    with pytest.raises(ValueError, match=message):
        trl.GRPOTrainer(
            model=model,
            reward_funcs=RewardLog(),
            args=trainer_args(tmp_path, max_steps=2, **argument),
            train_dataset=prompt_dataset(16),
            processing_class=tokenizer,
            callbacks=[KGPSCallback()],
        )


def test_remove_unused_columns_set_after_the_trainer_is_built_is_refused_before_the_first_batch(
    tmp_path, model, tokenizer
):
    # Set on the arguments once the adapter had checked them, it used to surface at step 1 as a collator's fault.
    def reads_no_column(completions, **kwargs):
        return [1.0] * len(completions)

    kgps = KGPSCallback()
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=reads_no_column,
        args=trainer_args(tmp_path, max_steps=2),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    trainer.args.remove_unused_columns = True
    with pytest.raises(ValueError, match=r"remove_unused_columns=True \(set on trainer.args after the trainer was "):
        trainer.train()
    assert kgps.sampler is None and kgps.engine is None and trainer.state.global_step == 0


@pytest.mark.parametrize("form", ["two callbacks", "one callback twice", "explicit form twice"])
def test_a_second_kgps_callback_on_one_trainer_is_refused_as_such(tmp_path, model, tokenizer, form):
    kgps = KGPSCallback()
    callbacks = {
        "two callbacks": [kgps, KGPSCallback(selector="uniform")],
        "one callback twice": [kgps, kgps],
        "explicit form twice": [],
    }[form]
    build = dict(
        model=model,
        reward_funcs=RewardLog(),
        args=trainer_args(tmp_path, max_steps=2),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
    )
    with pytest.raises(ValueError, match=r"A trainer takes one KGPSCallback, and this one has two.*train one trainer"):
        trainer = trl.GRPOTrainer(**build, callbacks=callbacks)
        trainer.add_callback(KGPSCallback(trainer=trainer))
        trainer.add_callback(KGPSCallback(trainer=trainer))
        trainer.train()


def test_an_infinite_reward_stops_training_before_kgps_counts_it(tmp_path, model, tokenizer):
    def reward(completions, idx, **kwargs):
        return [float("inf") if i == 3 else 1.0 for i in idx]

    kgps = KGPSCallback()
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=trainer_args(tmp_path, max_steps=8),
        train_dataset=prompt_dataset(4),
        processing_class=tokenizer,
        callbacks=[kgps],
    )
    with pytest.raises(ValueError, match=r"The reward function 'reward' returned inf for completion \d+ .*finite"):
        trainer.train()
    assert kgps.ledger.batches_scored == 0 and (kgps.selector.mean == 0).all()


def test_pool_smaller_than_a_generation_batch_is_refused(tmp_path, model, tokenizer):
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=RewardLog(),
        args=trainer_args(tmp_path, max_steps=2, per_device_train_batch_size=8, steps_per_generation=4),
        train_dataset=prompt_dataset(4),
        processing_class=tokenizer,
        callbacks=[KGPSCallback()],
    )
    with pytest.raises(
        ValueError, match=r"needs 8 distinct prompts \(per_device_train_batch_size x .*\) and the dataset has 4: use"
    ):
        trainer.train()


def test_delta_norm_matches_full_precision_copies(tmp_path, model, tokenizer):
    # The paper's warmup: its first batches are a permutation, with mixed groups and so nonzero updates.
    trainer, kgps, events = train(
        tmp_path, model, tokenizer, max_steps=6, learning_rate=1e-6, config=KGPSConfig.paper()
    )
    oracle = [e[1] for e in events if e[0] == "norm"]
    logged = [entry["kgps/delta_norm"] for entry in trainer.state.log_history if "kgps/delta_norm" in entry]
    assert len(oracle) == len(logged) == 6 and min(oracle) > 0
    # lr 1e-6 on float32 weights: steps far below bf16's resolution, measured exactly
    np.testing.assert_allclose(logged, oracle, rtol=1e-9)
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())


def faulty_run(tmp_path, model, tokenizer, reward, events, max_steps=24):
    kgps = KGPSCallback(DEFAULT)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=trainer_args(tmp_path, max_steps=max_steps),
        train_dataset=prompt_dataset(16),
        processing_class=tokenizer,
        callbacks=[NormLog(events), kgps],
    )
    return trainer, kgps


def test_missing_rewards_do_not_count_toward_k(tmp_path, model, tokenizer):
    events = []
    reward = FaultyReward(events, none_prompts={0, 1})
    trainer, kgps = faulty_run(tmp_path, model, tokenizer, reward, events)
    trainer.train()
    reference = replay(events, 16, kgps.ledger.warmup_batches)
    np.testing.assert_allclose(kgps.selector.mean, reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)
    # Prompts without any reward were never observed: only the factor the pool shares moved their beliefs.
    shared_mean = kgps.selector.shared.moments(np.array([0, 1]))[0]
    np.testing.assert_allclose(kgps.selector.mean[[0, 1]], shared_mean, rtol=1e-6, atol=1e-6)
    assert not kgps.ledger.observed[[0, 1]].any() and kgps.ledger.observed[2:].all()


def test_rewards_that_are_all_none_give_one_warning_from_kgps(tmp_path, model, tokenizer):
    events = []
    reward = FaultyReward(events, none_prompts=set(range(16)))
    trainer, kgps = faulty_run(tmp_path, model, tokenizer, reward, events, max_steps=6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    ours = [w for w in caught if "KGPS observed no reward" in str(w.message)]
    assert len(ours) == 1 and "returned None or NaN for every completion" in str(ours[0].message)
    assert not kgps.ledger.observed.any()


def test_a_callback_passed_to_a_second_trainer_raises_with_the_fix(tmp_path, model, tokenizer):
    kgps = KGPSCallback()

    def build():
        return trl.GRPOTrainer(
            model=model,
            reward_funcs=RewardLog(events=[]),
            args=trainer_args(tmp_path, max_steps=2),
            train_dataset=prompt_dataset(16),
            processing_class=tokenizer,
            callbacks=[kgps],
        )

    first = build()
    first.train()
    # A notebook cell run twice: the same callback object, a new trainer.
    with pytest.raises(RuntimeError, match=r"belongs to another trainer.*Pass a new one to each trainer"):
        build()


def test_a_reward_function_that_raises_stops_training_and_leaves_kgps_consistent(tmp_path, model, tokenizer):
    events = []
    reward = FaultyReward(events, fail_on=12)
    trainer, kgps = faulty_run(tmp_path, model, tokenizer, reward, events)
    with pytest.raises(RuntimeError, match="reward server is down"):
        trainer.train()
    reference = replay(events, 16, kgps.ledger.warmup_batches)
    np.testing.assert_allclose(kgps.selector.mean, reference.mean, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(kgps.selector.variance, reference.variance, rtol=1e-5, atol=1e-6)
    assert kgps.ledger.batches_scored == 11 and len(kgps.ledger.pending) >= 1


@pytest.mark.parametrize(
    "name, cls",
    [
        ("uniform", "UniformSelector"),
        ("mopps", "MoPPSSelector"),
        ("greso", "GRESOSelector"),
        ("dps", "DPSSelector"),
        ("arcus", "ArcusSelector"),
        ("gaussian", "GaussianCurriculumSelector"),
        ("insight", "InSightSelector"),
    ],
)
def test_baselines_train_through_the_same_callback(tmp_path, model, tokenizer, name, cls):
    trainer, kgps, _ = train(tmp_path, model, tokenizer, max_steps=14, selector=name)
    assert type(kgps.selector).__name__ == cls and kgps.ledger.batches_chosen > kgps.ledger.warmup_batches
    assert not any("kgps/process_noise" in entry for entry in trainer.state.log_history)


def test_the_offline_filter_trains_only_prompts_its_pass_rates_say_are_sometimes_solved(tmp_path, model, tokenizer):
    rows = prompt_dataset(24)
    rates = [0.0 if i % 3 == 0 else 1.0 if i % 3 == 1 else 0.5 for i in range(24)]  # 8 prompts kept
    rows = rows.add_column("pass_rate", rates)
    events = []
    kgps = KGPSCallback(KGPSConfig(prior_column="pass_rate"), selector="offline_filter")
    trl.GRPOTrainer(
        model=model,
        reward_funcs=RewardLog(events=events),
        args=trainer_args(tmp_path, max_steps=8),
        train_dataset=rows,
        processing_class=tokenizer,
        callbacks=[kgps],
    ).train()
    trained = {i for event in events if event[0] == "scored" for i in event[1]}
    assert trained == {i for i in range(24) if i % 3 == 2}, "each kept prompt once an epoch of 4 batches, twice in 8"


def test_an_unknown_selector_name_is_refused():
    with pytest.raises(ValueError, match="'thompson' is not one of"):
        KGPSCallback(selector="thompson")


def test_a_second_train_call_continues_without_a_skipped_batch_warning(tmp_path, model, tokenizer, caplog):
    trainer, kgps, _ = train(tmp_path, model, tokenizer, max_steps=4)
    assert len(kgps.ledger.pending) == 1  # chosen ahead while the last batch trained, never generated
    trainer.args.max_steps = 8
    with caplog.at_level(logging.WARNING, logger="trl_kgps"):
        trainer.train()
    assert not [record for record in caplog.records if "skipped" in record.getMessage()]
    assert kgps.ledger.batches_scored == 4 + 8  # a second train() starts again at step 0


def test_dropping_zero_advantage_groups_is_refused_by_the_synchronous_trainer_naming_the_one_that_can(
    tmp_path, model, tokenizer
):
    with pytest.raises(ValueError, match=r"drop_zero_advantage=True\) needs TRL's AsyncGRPOTrainer: GRPOTrainer"):
        trl.GRPOTrainer(
            model=model,
            reward_funcs=RewardLog(),
            args=trainer_args(tmp_path),
            train_dataset=prompt_dataset(8),
            processing_class=tokenizer,
            callbacks=[KGPSCallback(drop_zero_advantage=True)],
        )
    with pytest.raises(TypeError, match="drop_zero_advantage must be True or False, got 'yes'"):
        KGPSCallback(drop_zero_advantage="yes")
