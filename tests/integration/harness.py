"""Builders for real TRL runs on a tiny model made from a config and a tokenizer trained here (no Hub access), and
the oracles the tests compare KGPS with."""

import os

import numpy as np
from transformers import TrainerCallback

from trl_kgps import KGPSCallback, KGPSConfig, KGPSSelector
from trl_kgps.tasks import tiny


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# The word-level tiny setup, shared with benchmarks/bench_trl_overhead.py.
WORDS = tiny.WORDS
build_tokenizer = tiny.word_tokenizer
build_model = tiny.word_model
prompt_dataset = tiny.word_prompts
trainer_args = tiny.grpo_config


class RewardLog:
    """A deterministic-per-seed 0/1 reward that records which dataset index got which reward."""

    __name__ = "logged_reward"

    def __init__(self, seed=0, events=None):
        self.rng = np.random.default_rng(seed)
        self.events = [] if events is None else events
        self.base = self.rng.uniform(0.1, 0.9, 1000)

    def __call__(self, prompts, completions, idx, **kwargs):
        rewards = [float(self.rng.uniform() < self.base[i]) for i in idx]
        self.events.append(("scored", list(idx), rewards))
        return rewards


class NormLog(TrainerCallback):
    """Records ||theta_t - theta_{t-1}||_2 after every optimizer step from full float64 copies: the oracle."""

    def __init__(self, events):
        self.events = events

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.copies = [p.detach().double().clone() for p in self.params]

    def on_optimizer_step(self, args, state, control, **kwargs):
        squares = 0.0
        for p, copy in zip(self.params, self.copies):
            squares += float(((p.detach().double() - copy) ** 2).sum())
            copy.copy_(p.detach())
        self.events.append(("norm", squares**0.5))


def replay(events, num_prompts, warmup_batches, config=None, seed=0):
    """Algorithm 1 fed the logged observations and norms, in the order they happened."""
    reference = KGPSSelector(num_prompts, config, seed=seed)
    observed = np.zeros(num_prompts, dtype=bool)
    scored_batches = 0
    for event in events:
        if event[0] == "norm":
            if scored_batches >= warmup_batches:
                reference.predict(event[1])
            continue
        _, idx, rewards = event
        idx = np.asarray(idx)
        counted = np.array([r is not None for r in rewards])  # a None reward is no observation
        rewards = np.array([0.0 if r is None else r for r in rewards])
        prompts = np.unique(idx)
        s = np.array([rewards[idx == i].sum() for i in prompts])
        k = np.array([counted[idx == i].sum() for i in prompts])
        if scored_batches < warmup_batches:
            first = ~observed[prompts] & (k > 0)
            reference.initialize(prompts[first], s[first], k[first])
            reference.update(prompts[~first], s[~first], k[~first])
        else:
            reference.update(prompts, s, k)
        observed[prompts[k > 0]] = True
        scored_batches += 1
    return reference


class SpyKGPS(KGPSCallback):
    """Records every batch the sampler chooses, and its lag."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batches, self.lags = [], []

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)  # the data loader and its sampler exist by now
        engine = self.sampler.engine
        if "choose" not in vars(engine):  # not spied on yet
            choose = engine.choose

            def spy():
                lag = len(engine.ledger.pending)
                batch = choose()
                self.batches.append(batch.tolist())
                self.lags.append(lag)
                return batch

            engine.choose = spy


def train(
    tmp_path, model, tokenizer, num_prompts=16, config=None, events=None, trainer_kwargs=None, selector=None, **args
):
    """A GRPO run with KGPS (or the named `selector`), logging rewards and oracle norms into `events`."""
    from trl import GRPOTrainer

    events = [] if events is None else events
    # The exact norm by default: tests compare the filter with a reference fed NormLog's exact norms.
    kgps = SpyKGPS(config or KGPSConfig(delta_norm_sample=1.0, feature_columns=[]), selector=selector)

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=RewardLog(events=events),
        args=trainer_args(tmp_path, **args),
        train_dataset=prompt_dataset(num_prompts),
        processing_class=tokenizer,
        callbacks=[NormLog(events), kgps],
        **(trainer_kwargs or {}),
    )
    trainer.train()
    return trainer, kgps, events


class FaultyReward(RewardLog):
    """RewardLog that returns None for some prompts (every completion) and for some completions, and raises on
    its `fail_on`-th call."""

    def __init__(self, events, none_prompts=(), fail_on=None):
        super().__init__(events=events)
        self.none_prompts, self.fail_on, self.calls = set(none_prompts), fail_on, 0

    def __call__(self, prompts, completions, idx, **kwargs):
        self.calls += 1
        if self.calls == self.fail_on:
            raise RuntimeError("the reward server is down")
        rewards = [
            None if i in self.none_prompts or (i + k) % 5 == 0 else float(self.rng.uniform() < self.base[i])
            for k, i in enumerate(idx)
        ]
        self.events.append(("scored", list(idx), rewards))
        return rewards


class StepReward:
    """A 0/1 reward that depends only on the step, the prompt and the completion's place: a resumed run gets the
    rewards an uninterrupted one would."""

    __name__ = "step_reward"

    def __call__(self, prompts, completions, idx, trainer_state, **kwargs):
        step = trainer_state.global_step
        return [
            float(np.random.default_rng([step, int(i), k]).uniform() < 0.2 + 0.06 * int(i)) for k, i in enumerate(idx)
        ]


class PromptStepReward:
    """`StepReward` by the prompt's text (`"p<i> a b"`) rather than its row: copies of a prompt earn alike, and KGPS,
    which sees no column read, keeps one belief per prompt."""

    __name__ = "prompt_step_reward"

    def __call__(self, prompts, completions, trainer_state, **kwargs):
        step = trainer_state.global_step
        numbers = [int(prompt.split()[0][1:]) for prompt in prompts]
        return [float(np.random.default_rng([step, i, k]).uniform() < 0.2 + 0.06 * i) for k, i in enumerate(numbers)]


class StopAt(TrainerCallback):
    """Stops training after optimizer step `step` (the checkpoint of that step is still written)."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True
