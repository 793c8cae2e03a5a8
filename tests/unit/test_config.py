import argparse
import dataclasses
import math
import re

import pytest

from trl_kgps import KGPSConfig
from trl_kgps.config import CHECK, Integer, Interval, Names, OneOf, Outside, Real, check_fields
from trl_kgps.selectors.experimental import EXPERIMENTAL_DEFAULTS, ExperimentalConfig, experimental


def test_the_paper_preset_holds_the_papers_hyperparameters():
    # A KGPSConfig runs the experimental fields at their defaults: the paper's method.
    assert experimental(KGPSConfig.paper()) == ExperimentalConfig.paper()
    config = ExperimentalConfig.paper()
    assert config.gamma == 0.1
    assert config.initial_variance == 1.0
    assert config.warmup_epochs == 1
    assert config.process_noise_power == 1.0
    assert config.fixed_process_noise is None
    assert config.utility == "posterior"
    assert config.quadrature_points == 5
    assert (config.observation, config.objective, config.selection) == ("logit", "variance", "top")
    assert config.candidates == 0 and config.process_noise_adaptation == 0


def test_paper_overrides_apply_on_top_of_the_preset():
    config = KGPSConfig.paper(warmup_epochs=0, gamma=0.05)
    assert (config.warmup_epochs, config.gamma, config.selection) == (0, 0.05, "top")


def test_the_default_departs_from_the_paper_only_in_the_documented_fields():
    default, paper = dataclasses.asdict(KGPSConfig()), dataclasses.asdict(KGPSConfig.paper())
    changed = {name for name in default if default[name] != paper[name]}
    assert changed == {
        "shared_variance",  # a factor shared across prompts (its own settings only act when it is on)
        "warmup_epochs",
        "observation",
        "selection",
        "delta_norm_sample",  # how ||theta_t - theta_{t-1}|| is measured: 1 % of the coordinates, not all
    }


def test_feature_columns_take_one_name_or_a_list_and_need_a_shared_part():
    assert KGPSConfig(feature_columns="level").feature_columns == ["level"]
    assert (
        KGPSConfig(feature_columns=[]).feature_columns
        == []
        == KGPSConfig.per_prompt(feature_columns=[]).feature_columns
    )
    assert KGPSConfig(feature_columns=("level", "type")).feature_columns == ["level", "type"]
    with pytest.raises(ValueError, match=r"shared_variance > 0 \(it is 0\).*Set shared_variance=1.0"):
        KGPSConfig(feature_columns=["level"], shared_variance=0.0)
    with pytest.raises(ValueError, match=r"observation='logit'.*Set shared_variance=0"):
        KGPSConfig(observation="logit")


def test_every_field_has_help_text():
    for f in dataclasses.fields(KGPSConfig):
        assert len(f.metadata.get("help", "")) > 20, f.name


@pytest.mark.parametrize(
    "field, value",
    [
        ("gamma", -0.1),
        ("gamma", float("nan")),
        ("gamma", float("inf")),
        ("gamma", "0.1"),
        ("initial_variance", 0.0),
        ("initial_variance", -1.0),
        ("warmup_epochs", -1),
        ("warmup_epochs", 1.5),
        ("warmup_epochs", True),
        ("process_noise_power", 0.0),
        ("fixed_process_noise", -0.01),
        ("fixed_process_noise", float("nan")),
        ("utility", "mean"),
        ("observation", "gaussian"),
        ("objective", "entropy"),
        ("selection", "greedy"),
        ("candidates", -1.0),
        ("candidates", 0.5),
        ("process_noise_adaptation", -0.1),
        ("group_size", 0),
        ("quadrature_points", 1),
        ("quadrature_points", 5.0),
        ("success_reward", ""),
        ("success_threshold", float("nan")),
        ("delta_norm_sample", 0.0),
        ("delta_norm_sample", 1.5),
        ("feature_columns", ["level", "level"]),
        ("feature_columns", ["level", 3]),
        ("shared_variance", -1.0),
        ("shared_noise_share", 1.5),
        ("residual_adaptation", -0.05),
    ],
)
def test_bad_values_name_the_field_the_value_and_a_fix(field, value):
    config_class = ExperimentalConfig if field in EXPERIMENTAL_DEFAULTS else KGPSConfig
    with pytest.raises(ValueError, match=field) as error:
        config_class(**{field: value})
    assert repr(value) in str(error.value)
    assert any(word in str(error.value) for word in ("use", "Use")), str(error.value)


@pytest.mark.parametrize(
    "preset, field, value",
    [
        (KGPSConfig, "gamma", 1e300),
        (KGPSConfig, "initial_variance", 1e39),
        (KGPSConfig, "shared_variance", 1e39),
        (ExperimentalConfig, "fixed_process_noise", 1e39),
        (KGPSConfig.paper, "gamma", 1e300),
        (KGPSConfig.paper, "initial_variance", 1e39),
    ],
)
def test_variances_past_what_float32_beliefs_hold_are_refused_with_the_range(preset, field, value):
    # Before, they were accepted: the beliefs overflowed float32 to NaN, which was saved without a word (and refused
    # as corrupted on resume); with the paper's preset, top-B selection over NaN scores raised an IndexError.
    message = rf"^{field} must be a finite number [>=]+ 0.0 and <= 1e\+12, got {re.escape(repr(value))}: use"
    with pytest.raises(ValueError, match=message):
        preset(**{field: value})
    preset(**{field: 1e12})  # the bound itself is accepted


def test_a_config_holds_what_users_set_and_the_variants_left_out_are_experimental():
    # KGPSConfig: the default's fields and the paper's preset, at most 18; no field that only a variant left out or
    # one of the paper's ablations uses.
    assert len(dataclasses.fields(KGPSConfig)) <= 18
    assert not {f.name for f in dataclasses.fields(KGPSConfig)} & EXPERIMENTAL_DEFAULTS.keys()
    for name, value in [("process_noise_power", 2.0), ("fixed_process_noise", 0.01), ("utility", "point")]:
        with pytest.raises(TypeError, match=name):
            KGPSConfig(**{name: value})
        assert getattr(ExperimentalConfig(**{name: value}), name) == value
    with pytest.raises(ValueError, match=r"selection must be one of \('sample', 'top'\), got 'thompson'"):
        KGPSConfig(selection="thompson")
    assert ExperimentalConfig(selection="thompson").selection == "thompson"


def test_parses_beside_grpo_config_with_trl_parser(tmp_path):
    from trl import GRPOConfig, TrlParser

    grpo_fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert not grpo_fields & {f.name for f in dataclasses.fields(KGPSConfig)}

    parser = TrlParser((GRPOConfig, KGPSConfig))
    grpo, kgps = parser.parse_args_into_dataclasses(
        [
            "--output_dir",
            str(tmp_path),
            "--use_cpu",
            "--bf16",
            "false",
            "--gamma",
            "0.2",
            "--selection",
            "top",
            "--quadrature_points",
            "7",
        ]
    )
    assert (kgps.gamma, kgps.selection, kgps.quadrature_points) == (0.2, "top", 7)
    assert kgps.initial_variance == KGPSConfig().initial_variance
    assert grpo.output_dir == str(tmp_path)
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses(["--output_dir", str(tmp_path), "--use_cpu", "--selection", "thompson"])


def test_a_variant_name_with_a_column_reads_that_column_as_its_feature():
    from trl_kgps.demo.variants import VARIANTS, variant_config

    assert variant_config("kgps") == dataclasses.replace(VARIANTS["kgps"], feature_columns=[])  # no column read
    by_level = variant_config("kgps+wide_shared:level")
    assert by_level == dataclasses.replace(VARIANTS["kgps+wide_shared"], feature_columns=["level"])
    assert variant_config("uniform") is None and variant_config("kgps:") is None and variant_config("x:level") is None


# Every declared check: KGPSConfig's, and those ExperimentalConfig adds or redeclares (`selection`).
CHECKED = [(KGPSConfig, f) for f in dataclasses.fields(KGPSConfig) if CHECK in f.metadata] + [
    (ExperimentalConfig, f)
    for f in dataclasses.fields(ExperimentalConfig)
    if CHECK in f.metadata and (f.name in EXPERIMENTAL_DEFAULTS or f.name == "selection")
]


def _bounds(span):
    low, high = (float(bound) for bound in span[1:-1].split(","))
    return low, high


def refused(check, metadata):
    """Values outside what `check` declares, each with the requirement the message must state."""
    none = [] if check.optional else [None]
    if isinstance(check, OneOf):
        return [("nosuch", f"be one of {tuple(metadata['choices'])}"), (None, "be one of")]
    if isinstance(check, Real):
        bound = "" if check.minimum == -math.inf else f" {'>' if check.strict else '>='} {check.minimum}"
        bound += f"{' and' if bound else ''} <= {check.maximum:g}" if check.maximum < math.inf else ""
        below = [check.minimum if check.strict else check.minimum - 1] if check.minimum > -math.inf else []
        above = [check.maximum * 10] if check.maximum < math.inf else []
        values = [*below, *above, math.nan, math.inf, "1", True, *none]
        return [(value, f"be a finite number{bound}") for value in values]
    if isinstance(check, Integer):
        return [
            (value, f"be an integer >= {check.minimum}")
            for value in (check.minimum - 1, check.minimum + 0.0, True, *none)
        ]
    if isinstance(check, Interval):
        low, high = _bounds(check.span)
        ends = [low] * (check.span[0] == "(") + [high] * (check.span[-1] == ")")
        return [(value, f"lie in {check.span}") for value in (low - 1, high + 1, math.nan, "0.5", *ends, *none)]
    if isinstance(check, Outside):
        return [(sum(_bounds(check.span)) / 2, f"be {check.what}")]
    if isinstance(check, Names):
        return [(value, f"be {check.what}") for value in ("", 3, *([["a", "a"], ["a", ""], ("a", 3)] * check.many))]
    raise AssertionError(f"no refused values for {check!r}")


def chain(check):
    while check is not None:
        yield check
        check = check.then


@pytest.mark.parametrize(
    "config_class, field, value, requirement, fix",
    [
        (config_class, f.name, value, requirement, check.fix)
        for config_class, f in CHECKED
        for check in chain(f.metadata[CHECK])
        for value, requirement in refused(check, f.metadata)
    ],
)
def test_every_declared_check_refuses_a_value_outside_it_by_name_value_and_fix(
    config_class, field, value, requirement, fix
):
    with pytest.raises(ValueError) as error:
        config_class(**{field: value})
    message = str(error.value)
    assert message.startswith(f"{field} must {requirement}"), message
    assert f", got {value!r}" in message and message.endswith(f"{fix}."), message


def test_every_field_but_a_flag_declares_what_it_accepts():
    unchecked = {f.name for f in dataclasses.fields(ExperimentalConfig)} - {f.name for _, f in CHECKED}
    assert unchecked == {"candidate_pass", "restart_on_missing_state"}
    for f in dataclasses.fields(ExperimentalConfig):
        if "choices" in f.metadata:
            assert isinstance(f.metadata[CHECK], OneOf), f.name
        # None, where it is the default, stays accepted; elsewhere it is refused (above).
        assert (f.default is None) == getattr(f.metadata.get(CHECK), "optional", False), f.name


def kept_in(check):
    """The bounds `check` accepts."""
    if isinstance(check, Real) and check.minimum > -math.inf and not check.strict:
        return [check.minimum, int(check.minimum)]
    if isinstance(check, Integer):
        return [check.minimum]
    if isinstance(check, Interval):
        low, high = _bounds(check.span)
        return [low] * (check.span[0] == "[") + [high] * (check.span[-1] == "]")
    return []


def test_the_bounds_a_check_keeps_in_are_accepted():
    for config_class, f in CHECKED:
        for value in kept_in(f.metadata[CHECK]):
            assert getattr(config_class(**{f.name: value}), f.name) == value, (f.name, value)


def test_the_checker_reads_the_choices_and_bounds_from_the_metadata():
    @dataclasses.dataclass
    class Toy:
        level: str = dataclasses.field(default="a", metadata={"choices": ["a", "b"], CHECK: OneOf(fix="use 'a'")})
        rate: float | None = dataclasses.field(
            default=None,
            metadata={
                CHECK: Real(minimum=2.0, optional=True, fix="use 2", then=Outside(span="[3, 4)", what="x", fix="no"))
            },
        )
        share: float = dataclasses.field(default=0.5, metadata={CHECK: Interval(span="(0, 1)", fix="Use a share")})

    check_fields(Toy(level="b", rate=4.0))
    with pytest.raises(ValueError, match=r"^level must be one of \('a', 'b'\), got 'c': use 'a'\.$"):
        check_fields(Toy(level="c"))
    Toy.__dataclass_fields__["level"].metadata["choices"].append("c")  # the checker reads the metadata as it is now
    check_fields(Toy(level="c"))
    with pytest.raises(ValueError, match=r"^rate must be a finite number >= 2.0, got 1.0: use 2\.$"):
        check_fields(Toy(rate=1.0))
    with pytest.raises(ValueError, match=r"^rate must be x, got 3.0: no\.$"):
        check_fields(Toy(rate=3.0))
    with pytest.raises(
        ValueError, match=r"^share must lie in \(0, 1\), got 1\. Use a share\.$"
    ):  # a sentence: ". Use"
        check_fields(Toy(share=1))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"selection": "greedy"},
            "selection must be one of ('sample', 'top'), got 'greedy': use one of those (KGPSConfig() holds the "
            "measured default, KGPSConfig.paper() the paper's choices).",
        ),
        (
            {"initial_variance": 0},
            "initial_variance must be a finite number > 0.0 and <= 1e+12, got 0: use a positive logit variance such as "
            "the paper's 1.0.",
        ),
        (
            {"quadrature_points": 1},
            "quadrature_points must be an integer >= 2, got 1: use 5 (the paper) or more nodes.",
        ),
        (
            {"success_threshold": math.inf},
            "success_threshold must be a finite number, got inf: use e.g. 0.5 for 0/1 rewards.",
        ),
        (
            {"candidates": 0.5},
            "candidates must be 0 or at least 1 (a multiple of the batch size), got 0.5: use e.g. 16, or 0 to choose "
            "among all prompts.",
        ),
        (
            {"delta_norm_sample": 0},
            "delta_norm_sample must lie in (0, 1], got 0: use 1 for the exact norm or a fraction such as 0.01 to save "
            "memory.",
        ),
        (
            {"feature_columns": ("a", "a")},
            "feature_columns must be distinct column names of the train dataset, got ('a', 'a'): use e.g. ['level', "
            "'type'], [] for one factor shared by all prompts, or None to find them.",
        ),
        (
            {"success_reward": ""},
            "success_reward must be the name of a reward function or None, got '': use the name the trainer logs it "
            "under (e.g. 'accuracy_reward').",
        ),
        (
            {"feature_columns": "level", "shared_variance": 0.0},
            "feature_columns=['level'] needs shared_variance > 0 (it is 0): the features only act through the shared "
            "part. Set shared_variance=1.0, or drop feature_columns.",
        ),
    ],
)
def test_messages_are_those_of_the_hand_written_checks_they_replace(kwargs, message):
    with pytest.raises(ValueError) as error:
        KGPSConfig(**kwargs)
    assert str(error.value) == message


def test_quirks_the_hand_written_checks_accepted_stay_accepted():
    # The two [0, 1]-style fractions compared with Python's numbers, bools included; the flags take only bools.
    assert KGPSConfig(delta_norm_sample=True).delta_norm_sample is True
    assert KGPSConfig(shared_noise_share=False).shared_noise_share is False
    with pytest.raises(ValueError, match="candidate_pass must be True or False, got 'yes'"):
        ExperimentalConfig(candidate_pass="yes")
    assert KGPSConfig(feature_columns=["level"]).feature_columns == ["level"]


def test_a_check_in_the_metadata_is_a_plain_store_action_to_argparse():
    from transformers import HfArgumentParser

    parser = HfArgumentParser(KGPSConfig)
    for config_class, f in CHECKED:
        if config_class is KGPSConfig:
            action = parser._option_string_actions[f"--{f.name}"]
            assert type(action) is argparse._StoreAction and action.help == f.metadata["help"], f.name
    (config,) = parser.parse_args_into_dataclasses(["--feature_columns", "level", "type", "--quadrature_points", "4"])
    assert (config.feature_columns, config.quadrature_points) == (["level", "type"], 4)
    (config,) = parser.parse_args_into_dataclasses([])  # unset: KGPS finds the metadata columns
    assert config.feature_columns is None
