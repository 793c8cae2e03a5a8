"""
The testbed's regimes and what each one trains: the warm-started policy (committed, not recomputed), the RL pool,
the held-out set, the reward and the GRPO arguments, all pinned here rather than inherited from library defaults.

Why the warm start is a committed file: it is 2,500 supervised AdamW steps at a learning rate of 3e-3, and that
training is chaotic. The rounding of torch's AVX-512 kernels and of its AVX2 kernels (which an AMD EPYC of the
Zen 2/3 generations runs) differs in the last bits, and after 2,500 steps the two networks differ by 15-98 % of each
weight matrix's norm while scoring the same held-out accuracy (0.361). RL from them does not learn at the same
speed: uniform gained +0.19 from one and +0.13 from the other (benchmarks/RECORD.md). The RL phase itself is not
sensitive that way. So the benchmark starts every run from the same bytes, `warm_start_<seed>.safetensors`, made
once by `python benchmarks/real_cpu.py --make_warm_start <seed>`. Which warm start a regime uses is part of the regime:
two networks trained by the same recipe are two policies, and the suite measures selectors on both.

Two task families: the sums (`trl_kgps.tasks.sharpening`) and Countdown (`benchmarks/realcpu/countdown.py`), each
with its own tokenizer, warm starts (`warm_start_<seed>.safetensors`, `warm_start_countdown_<seed>.safetensors`, and
`warm_start_countdown_sharpened_<seed>.safetensors` from Countdown's other recipe), pools and held-out set; a regime
names its family and its warm start's recipe.
"""

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np


HERE = os.path.dirname(os.path.abspath(__file__))
WARM_START_STEPS = 2500
NUM_EVAL_PROMPTS = 1024
BASE_POOL = 512
FAMILIES = ("sums", "countdown")
# Countdown: the protocol's 512 test prompts, a pool of 512 as the sums', both an even mix of 3 and 4 numbers.
COUNTDOWN_EVAL_PROMPTS = 512
# A Countdown regime's extra prompts are chosen among this many candidates in neither the pool nor the held-out set
# (4-number ones for `out_of_reach`, 3-number ones for `solved`) by its warm start's exact success: the ones it solves
# least, or most. A fixed share of a fixed set, where a threshold would depend on how well one warm start came out.
COUNTDOWN_CANDIDATES = 4096
# Each family's warm-start recipes (`Regime.recipe`): `""` its own, and Countdown's `"sharpened"`
# (`countdown.WARM_START_ACCURACY`), whose wrong strings are drawn from a stream of this seed.
RECIPES = {"sums": ("",), "countdown": ("", "sharpened")}
RECIPE_SEED = 11


@dataclass(frozen=True)
class Regime:
    """
    One setting of the suite. Every regime starts from a committed warm start and is judged on its family's held-out
    prompts (the same 1,024 sums, or the same 512 Countdown puzzles); regimes differ in what shapes selection.

    Args:
        name, description: how reports name and explain it.
        out_of_reach (`int`): level-4 prompts (never in the warm start: success ~0) added to the 512-prompt pool;
            Countdown: the 4-number puzzles its warm start solves least (`countdown_splits`).
        solved (`int`): level-1 prompts (the warm start's answers are all right: success ~0.96) added to the pool;
            Countdown: the 3-number puzzles its warm start solves most.
        column (`str`): the `level` column the selectors read: `"level"` the true one; `"wrong_labels"` half of
            the labels replaced by another level drawn at random; `"merged_levels"` levels 1 and 2 as one label,
            3 and 4 as another; `"unrelated"` one of four labels drawn at random, unrelated to difficulty. The true
            level stays in `true_level` for the report and `oracle_level`.
        prompts_per_step (`int`), num_generations (`int`): a step's batch, `B` prompts x `G` completions.
        learning_rate (`float`): peak learning rate, reached by a linear warmup over `lr_warmup_steps`.
        lr_scheduler_type (`str`): what follows the warmup, as `transformers` names it: `"linear"` decays to zero at
            the last step.
        steps (`int`): GRPO steps per run; `snapshot_every`: steps between measurements of the truth.
        warm_start (`int`): the seed of the warm start the policy starts from (its initial weights and batch order).
        recipe (`str`): what the warm start was shown: `""` its family's own recipe (the sums' answers right at a rate
            set by the level; Countdown's right operator strings); `"sharpened"` (Countdown) right strings at a rate
            set by the number count, wrong ones otherwise (`countdown.WARM_START_ACCURACY`).
        prior (`str`): `"fresh"` or `"stale"` adds a `solve_rate` column, each prompt's share right of 8 samples
            (`PRIOR_SAMPLES`) from a warm start's true success rate: the regime's own (fresh), or the other warm
            start's (stale: another policy's pass rates, as a dataset ships them); `""` none.
        copies (`int`): rows per prompt: the pool's every row repeated this many times, the rows shuffled (DAPO-Math-17k
            repeats each prompt about 100 times). The truth is measured once per prompt and given to each copy.
        family (`str`): the task, one of `FAMILIES`: `"sums"` or `"countdown"` (whose `level` is a puzzle's count of
            numbers, 3 or 4).
    """

    name: str
    description: str
    out_of_reach: int = 0
    solved: int = 0
    column: str = "level"
    prompts_per_step: int = 4
    num_generations: int = 8
    learning_rate: float = 2.8e-4
    lr_scheduler_type: str = "linear"
    steps: int = 400
    lr_warmup_steps: int = 10
    snapshot_every: int = 20
    warm_start: int = 0
    recipe: str = ""
    prior: str = ""
    copies: int = 1
    family: str = "sums"

    @property
    def rollouts_per_step(self) -> int:
        return self.prompts_per_step * self.num_generations


# Each regime trains at the peak learning rate where uniform ends best (`benchmarks/lr_sweep.py`, seeds 0-2, linear
# decay: `benchmarks/results/lr_sweep/linear/`, Countdown's `lr_sweep_countdown/linear/`, and each regime from the
# sharpened warm start its own `lr_sweep_<regime>/linear/`); a regime with a wrong column at its twin's.
REGIMES = {
    regime.name: regime
    for regime in (
        Regime("base", "512 prompts, even levels, 4 prompts x 8 completions a step", learning_rate=2.8e-4),
        Regime(
            "groups_of_4", "512 prompts, even levels, 8 prompts x 4 completions a step: more unanimous groups",
            prompts_per_step=8, num_generations=4, learning_rate=5.6e-4,
        ),
        Regime(
            "out_of_reach", "the same 512 + 512 level-4 prompts out of reach (5/8 of the pool), 4 x 8 a step",
            out_of_reach=512, learning_rate=2.8e-4,
        ),
        Regime(
            "other_policy", "as `base`, from warm start 1: another network trained by the same recipe",
            warm_start=1, learning_rate=4e-4,
        ),
        Regime(
            "mostly_solved", "the same 512 + 512 level-1 prompts already solved (5/8 of the pool), 4 x 8 a step",
            solved=512, learning_rate=4e-4,
        ),
        Regime(
            "countdown", "Countdown: 512 puzzles, even 3 and 4 numbers, 4 prompts x 8 completions a step",
            family="countdown", learning_rate=1.4e-4,
        ),
        Regime(
            "countdown_out_of_reach", "the same 512 + the 512 of 4,096 4-number puzzles the warm start solves least",
            family="countdown", out_of_reach=512, learning_rate=7e-5,
        ),
        Regime(
            "countdown_mostly_solved", "the same 512 + the 512 of 4,096 3-number puzzles the warm start solves most",
            family="countdown", solved=512, learning_rate=2e-4,
        ),
        Regime(
            "countdown_sharpened",
            "the same 512, from a warm start shown right strings 3/4 (3 numbers) and 2/5 (4 numbers) of the time",
            family="countdown", recipe="sharpened", learning_rate=1.1e-3,
        ),
        Regime(
            "countdown_sharpened_out_of_reach",
            "as `countdown_sharpened` + the 512 of 4,096 4-number puzzles its warm start solves least",
            family="countdown", recipe="sharpened", out_of_reach=512, learning_rate=8e-4,
        ),
    )
}  # fmt: skip
# Regimes whose `level` column is partly or wholly wrong: what the default loses, or not, when its column misleads.
CORRUPTED = {
    regime.name: regime
    for regime in (
        Regime(
            "wrong_labels", "as `base`, half of the `level` labels wrong", column="wrong_labels", learning_rate=2.8e-4
        ),
        Regime(
            "wrong_labels_out_of_reach", "as `out_of_reach`, half of the `level` labels wrong",
            out_of_reach=512, column="wrong_labels", learning_rate=2.8e-4,
        ),
        Regime(
            "merged_levels", "as `base`, levels 1+2 and 3+4 merged into two labels", column="merged_levels",
            learning_rate=2.8e-4,
        ),
        Regime(
            "unrelated_column", "as `base`, a `level` column unrelated to difficulty", column="unrelated",
            learning_rate=2.8e-4,
        ),
    )
}  # fmt: skip
# Datasets as users bring them: a pool whose every prompt is on many rows.
USERS_DATA = {
    regime.name: regime
    for regime in (
        Regime("copies_20", "as `base`, every prompt on 20 shuffled rows (10,240 rows)", copies=20, learning_rate=2.8e-4),
        Regime(
            "prior_fresh", "as `base`, with a `solve_rate` column: the warm start's pass rate over 8 samples",
            prior="fresh", learning_rate=2.8e-4,
        ),
        Regime(
            "prior_stale", "as `base`, with a `solve_rate` column measured on the other warm start (another policy)",
            prior="stale", learning_rate=2.8e-4,
        ),
    )
}  # fmt: skip
# A `solve_rate` column's samples per prompt (INTELLECT-3-RL ships `avg@8`), drawn with this seed.
PRIOR_SAMPLES, PRIOR_SEED = 8, 11
ALL_REGIMES = {**REGIMES, **CORRUPTED, **USERS_DATA}
COLUMNS = ("level", "wrong_labels", "merged_levels", "unrelated")


@dataclass
class Setting:
    """The policy, the data, the reward and the GRPO arguments of one regime."""

    regime: Regime
    model: object
    tokenizer: object
    train: object  # datasets.Dataset with "prompt", "answer", "level" (and "true_level" where the column is wrong)
    test: object
    reward: Callable
    grpo: dict = field(default_factory=dict)

    @property
    def true_levels(self) -> np.ndarray:
        """Each training prompt's true level, shape `(N,)`, whatever the `level` column says."""
        column = "true_level" if "true_level" in self.train.column_names else "level"
        return np.asarray(self.train[column])

    def true_success(self, model, dataset) -> np.ndarray:
        """Every row's exact success rate under GRPO's sampling (one teacher-forced pass, no sampling noise), measured
        once per prompt where rows repeat prompts (`Regime.copies`)."""
        if self.regime.copies == 1:
            return exact_success(self.regime.family, model, self.tokenizer, dataset["prompt"], dataset["answer"])
        prompts, first, row_prompt = np.unique(np.asarray(dataset["prompt"]), return_index=True, return_inverse=True)
        answers = [dataset["answer"][int(i)] for i in first]
        return exact_success(self.regime.family, model, self.tokenizer, prompts.tolist(), answers)[row_prompt]

    def fingerprint(self) -> dict:
        """Hashes of what the regime trains on: a change in the data or the warm start shows up here."""
        digest = lambda values: hashlib.sha256("\n".join(map(str, values)).encode()).hexdigest()[:16]  # noqa: E731
        return dict(
            train=digest(list(self.train["prompt"]) + list(self.train["answer"])),
            test=digest(list(self.test["prompt"]) + list(self.test["answer"])),
            warm_start=warm_start_digest(self.regime.warm_start, self.regime.family, self.regime.recipe),
            **({"column": digest(self.train["level"])} if self.regime.column != "level" else {}),
        )


def exact_success(family: str, model, tokenizer, prompts, answers) -> np.ndarray:
    """
    Each prompt's exact success rate under sampling at temperature 1, shape `(len(prompts),)`: a sum's one right
    answer's teacher-forced probability, or a Countdown puzzle's summed over every operator string that reaches its
    target (`countdown.exact_success`, which reads the puzzle from the prompt and not `answers`).
    """
    if family == "countdown":
        from . import countdown

        return countdown.exact_success(model, tokenizer, prompts)
    from trl_kgps.tasks.evaluation import answer_probabilities

    return answer_probabilities(model, tokenizer, prompts, answers)


def grpo_arguments(regime: Regime) -> dict:
    """
    Everything the benchmark means by "GRPO", passed explicitly so that a TRL or transformers release that changes a
    default cannot change the benchmark: sampling at temperature 1 with no top-k or top-p (the exact success rates
    assume it), DAPO's token-level loss, rewards scaled within each group, no KL term, one update per generation,
    float32, plain AdamW, the regime's learning rate and schedule.
    """
    return dict(
        use_cpu=True,
        bf16=False,
        fp16=False,
        max_completion_length=4,  # the longest answer (3 digits, or 3 Countdown operators) and <eos>
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        repetition_penalty=1.0,
        loss_type="dapo",
        scale_rewards="group",
        beta=0.0,
        epsilon=0.2,
        num_iterations=1,
        mask_truncated_completions=False,
        learning_rate=regime.learning_rate,
        warmup_steps=regime.lr_warmup_steps,
        lr_scheduler_type=regime.lr_scheduler_type,
        optim="adamw_torch",
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        max_grad_norm=1.0,
        gradient_checkpointing=False,
    )


def splits(regime: Regime):
    """
    The regime's RL pool and the shared held-out set: the 512-prompt pool and 1,024 held-out prompts of
    `trl_kgps.tasks.sharpening.make_splits` (seed 0), plus `regime.out_of_reach` distinct level-4 prompts and
    `regime.solved` distinct level-1 prompts in neither, and the `level` column `regime.column` says.
    """
    from datasets import Dataset, concatenate_datasets

    from trl_kgps.tasks import sharpening

    if regime.family == "countdown":
        return countdown_splits(regime)
    train, test, _ = sharpening.make_splits(BASE_POOL, NUM_EVAL_PROMPTS, 1, seed=0)
    taken = set(train["prompt"]) | set(test["prompt"])
    for count, level, stream in ((regime.out_of_reach, 4, 4), (regime.solved, 1, 6)):
        if count:  # each from a stream of its own: the 512-prompt pool stays the same
            extra = _extra_prompts(count, level, taken, np.random.default_rng(stream))
            train = concatenate_datasets([train, Dataset.from_dict(extra, features=train.features)])
    if regime.column != "level":
        labels = corrupted_labels(np.asarray(train["level"]), regime.column, np.random.default_rng(5))
        train = train.rename_column("level", "true_level").add_column("level", labels.tolist())
    if regime.copies > 1:
        rows = np.random.default_rng(7).permutation(np.repeat(np.arange(len(train)), regime.copies))
        train = train.select(rows).flatten_indices()
    return train, test


def countdown_base(count: int = 0) -> tuple[dict, dict, set, dict]:
    """
    Countdown's 512-puzzle pool and `COUNTDOWN_EVAL_PROMPTS` held-out puzzles (seed 0, even 3 and 4 numbers), the set
    of their prompts, and `count` warm-start puzzles in neither, drawn with replacement by the same generator after
    them: `(train, test, taken, warm)`, `warm` holding `prompt` and `answer` (the reference operator string).
    """
    from . import countdown

    rng = np.random.default_rng(0)
    taken: set = set()
    train = countdown.distinct_puzzles(BASE_POOL, countdown.NUMBER_COUNTS, taken, rng)
    test = countdown.distinct_puzzles(COUNTDOWN_EVAL_PROMPTS, countdown.NUMBER_COUNTS, taken, rng)
    warm: dict[str, list] = {"prompt": [], "answer": []}
    while len(warm["prompt"]) < count:
        prompt, equation, _ = countdown.puzzle(int(rng.choice(countdown.NUMBER_COUNTS)), rng)
        if prompt not in taken:
            warm["prompt"].append(prompt)
            warm["answer"].append(equation.split("=")[0][1::2])  # "7*3+2" -> "*+"
    return train, test, taken, warm


def countdown_splits(regime: Regime):
    """
    A Countdown regime's pool and the family's held-out set (`countdown_base`), plus the `regime.out_of_reach`
    4-number puzzles its warm start solves least and the `regime.solved` 3-number ones it solves most, each among
    `COUNTDOWN_CANDIDATES` distinct puzzles in neither split from a stream of its own (the 512-puzzle pool stays the
    same), in the order they were drawn. The warm start itself trained on puzzles drawn with replacement outside the
    two splits only, so it has seen most 3-number extras (as the sums' warm start has seen their level-1 extras).
    """
    from datasets import Dataset

    from . import countdown

    if regime.column != "level" or regime.copies != 1 or regime.prior:
        raise ValueError(f"{regime.name}: a Countdown regime has its true `level` column, one row a prompt, no prior.")
    train, test, taken, _ = countdown_base()
    for count, level, stream, sign in ((regime.out_of_reach, 4, 4, 1), (regime.solved, 3, 6, -1)):
        if not count:
            continue
        model, tokenizer = policy(regime.warm_start, regime.family, regime.recipe)
        rng = np.random.default_rng(stream)
        candidates = countdown.distinct_puzzles(COUNTDOWN_CANDIDATES, (level,), set(taken), rng)
        p = countdown.exact_success(model, tokenizer, candidates["prompt"])
        kept = np.sort(np.argsort(sign * p, kind="stable")[:count])  # the least (or most) solved, in drawn order
        for key in train:
            train[key] += [candidates[key][i] for i in kept]
    return Dataset.from_dict(train), Dataset.from_dict(test)


def _extra_prompts(count: int, level: int, taken: set, rng: np.random.Generator) -> dict[str, list]:
    """`count` distinct sums of `level` not in `taken` (which grows by them)."""
    from trl_kgps.tasks import sharpening
    from trl_kgps.tasks.arithmetic import sum_problem

    extra = {"prompt": [], "answer": [], "level": []}
    while len(extra["prompt"]) < count:
        prompt, answer = sum_problem(sharpening.LEVELS[level], rng)
        if prompt not in taken:
            taken.add(prompt)
            extra["prompt"].append(prompt)
            extra["answer"].append(answer)
            extra["level"].append(level)
    return extra


def corrupted_labels(levels: np.ndarray, column: str, rng: np.random.Generator) -> np.ndarray:
    """
    The `level` column `column` (see `Regime`) for prompts of true `levels` (shape `(N,)`, 1-4), shape `(N,)`.

    >>> corrupted_labels(np.array([1, 2, 3, 4]), "merged_levels", np.random.default_rng(0))
    array([1, 1, 3, 3])
    """
    if column == "wrong_labels":  # a random half, each moved to one of the three other levels
        labels = levels.copy()
        wrong = rng.permutation(levels.size)[: levels.size // 2]
        labels[wrong] = (levels[wrong] - 1 + rng.integers(1, 4, wrong.size)) % 4 + 1
        return labels
    if column == "merged_levels":
        return np.where(levels <= 2, 1, 3)
    if column == "unrelated":
        return rng.integers(1, 5, levels.size)
    raise ValueError(f"column={column!r} is not one of {COLUMNS}.")


def warm_start_path(seed: int, family: str = "sums", recipe: str = "") -> str:
    """
    The committed warm start of `seed`: `benchmarks/realcpu/warm_start_<seed>.safetensors`, or for Countdown
    `warm_start_countdown_<seed>.safetensors` (`warm_start_countdown_<recipe>_<seed>.safetensors` from another recipe).
    """
    if family not in FAMILIES:
        raise ValueError(f"family={family!r} is not one of {FAMILIES}.")
    if recipe not in RECIPES[family]:
        raise ValueError(f"recipe={recipe!r} is not one of {family}'s warm-start recipes {RECIPES[family]}.")
    parts = ["warm_start"] + ([family] if family != "sums" else []) + ([recipe] if recipe else []) + [str(seed)]
    name = "_".join(parts)
    return os.path.join(HERE, f"{name}.safetensors")


def tokenizer_for(family: str):
    """The family's character tokenizer: the sums' alphabet, or Countdown's superset of it (`countdown.VOCABULARY`)."""
    from trl_kgps.tasks import tiny

    from . import countdown

    return tiny.build_tokenizer() if family == "sums" else countdown.build_tokenizer()


def policy(seed: int = 0, family: str = "sums", recipe: str = ""):
    """
    The family's character tokenizer and the committed warm-started policy of `seed` (about 75k parameters), from
    `recipe` (`Regime.recipe`).
    """

    from trl_kgps.tasks import tiny

    path = warm_start_path(seed, family, recipe)
    if not os.path.exists(path):
        flag = "--make_warm_start" if family == "sums" else f"--family {family} --make_warm_start"
        flag = f"--recipe {recipe} {flag}" if recipe else flag
        raise FileNotFoundError(
            f"{path} is missing: the warm starts ship with the repository; `python benchmarks/real_cpu.py "
            f"{flag} {seed}` trains one again (on this machine's CPU, so not the same bytes)."
        )
    tokenizer = tokenizer_for(family)
    model = tiny.build_model(tokenizer, seed=seed)
    tiny.load_weights(model, path)
    return model, tokenizer


def build(regime: Regime) -> Setting:
    """The `Setting` of `regime`."""
    from trl_kgps.tasks import arithmetic

    from . import countdown

    model, tokenizer = policy(regime.warm_start, regime.family, regime.recipe)
    train, test = splits(regime)
    if regime.prior:
        from trl_kgps.tasks.evaluation import answer_probabilities

        measured_on = model if regime.prior == "fresh" else policy(1 - regime.warm_start)[0]
        p = answer_probabilities(measured_on, tokenizer, train["prompt"], train["answer"])
        solved = np.random.default_rng(PRIOR_SEED).binomial(PRIOR_SAMPLES, p) / PRIOR_SAMPLES
        train = train.add_column("solve_rate", solved.tolist())
    reward = countdown.countdown_reward if regime.family == "countdown" else arithmetic.arithmetic_reward
    return Setting(regime, model, tokenizer, train, test, reward, grpo_arguments(regime))


def with_regime(setting: Setting, regime: Regime) -> Setting:
    """
    `setting` trained as `regime` says, which may differ from `setting.regime` only in how it trains (the learning
    rate, its schedule, the steps), never in its data or warm start.
    """
    import dataclasses

    data = ("out_of_reach", "solved", "column", "warm_start", "recipe", "copies", "prior", "family")
    if any(getattr(regime, key) != getattr(setting.regime, key) for key in data):
        raise ValueError(f"{regime} trains on other data than {setting.regime}: build its own setting.")
    return dataclasses.replace(setting, regime=regime, grpo=grpo_arguments(regime))


def make_warm_start(seed: int = 0, path: str | None = None, family: str = "sums", recipe: str = "") -> dict:
    """
    Trains the warm start of `seed` from its recipe (2,500 supervised steps on sums whose answers are right at a rate
    set by the level: `trl_kgps.tasks.sharpening`; for Countdown, on the operator strings of puzzles in neither its
    pool nor its held-out set, `countdown_base`, all right or, `recipe="sharpened"`, right at a rate set by the number
    count: `countdown.warm_start_answers`; `seed` sets the initial weights and the batch order) and writes it to
    `path` (`warm_start_path(seed, family, recipe)`) with a JSON record beside it. The bytes depend on the CPU's
    kernels (see the module docstring): the committed file is the one every run loads.
    """
    import time

    from benchmarks.realcpu.environment import environment
    from trl_kgps.tasks import sharpening, tiny

    path = path or warm_start_path(seed, family, recipe)
    tokenizer = tokenizer_for(family)
    model = tiny.build_model(tokenizer, seed=seed)
    if family == "sums":
        _, test, warm = sharpening.make_splits(BASE_POOL, NUM_EVAL_PROMPTS, WARM_START_STEPS * 64, seed=0)
    else:
        from . import countdown

        _, test, _, warm = countdown_base(WARM_START_STEPS * 64)
        test = {key: test[key] for key in ("prompt", "answer")}
        if recipe:
            rng = np.random.default_rng(RECIPE_SEED)
            warm["answer"] = countdown.warm_start_answers(warm["prompt"], warm["answer"], recipe, rng)
    start = time.perf_counter()
    losses = tiny.warm_start(model, tokenizer, warm["prompt"], warm["answer"], WARM_START_STEPS, seed=seed)
    seconds = time.perf_counter() - start
    tiny.save_weights(model, path)
    heldout = float(exact_success(family, model, tokenizer, test["prompt"], test["answer"]).mean())
    record = dict(
        seed=seed, steps=WARM_START_STEPS, final_loss=losses[-1], heldout_accuracy=heldout, sha256=_digest(path),
        environment=environment(),
    )  # fmt: skip
    if family != "sums":  # the sums' records predate these fields and stay as they were written
        record = dict(family=family, **({"recipe": recipe} if recipe else {}), **record, train_s=round(seconds, 1))
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump(record, f, indent=1)
    return record


def warm_start_digest(seed: int = 0, family: str = "sums", recipe: str = "") -> str | None:
    """The SHA-256 of the committed warm start of `seed`, `family` and `recipe`, `None` if it is missing."""
    return _digest(warm_start_path(seed, family, recipe))


def _digest(path: str) -> str | None:
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def describe(regime: Regime) -> dict:
    """The regime as a plain dict, for the results file."""
    return asdict(regime)
