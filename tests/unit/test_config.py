import dataclasses
import json
import math
import re
import typing
from pathlib import Path

import numpy as np
import pytest

import trl_kgps
from trl_kgps import KGPSConfig
from trl_kgps.config import NO_METADATA, WITH_METADATA
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
    # As it runs on a dataset with metadata columns, and wherever a selector is built without a dataset.
    default = dataclasses.asdict(KGPSConfig().resolved(has_metadata=True))
    paper = dataclasses.asdict(KGPSConfig.paper())
    changed = {name for name in default if default[name] != paper[name]}
    assert changed == {
        "shared_variance",  # a factor shared across prompts (its own settings only act when it is on)
        "warmup_epochs",
        "observation",
        "selection",
        "process_noise_adaptation",  # gamma calibrated online
        "delta_norm_sample",  # how ||theta_t - theta_{t-1}|| is measured: 1 % of the coordinates, not all
    }


def test_the_fields_a_dataset_decides_default_to_none_and_a_value_set_is_never_changed():
    config = KGPSConfig()
    assert {name: getattr(config, name) for name in NO_METADATA} == dict.fromkeys(WITH_METADATA)
    for has_metadata, values in [(True, WITH_METADATA), (False, NO_METADATA)]:
        assert {name: getattr(config.resolved(has_metadata), name) for name in values} == values
        for name, value in WITH_METADATA.items():  # the with-metadata default, set: kept on a dataset without any
            assert getattr(KGPSConfig(**{name: value}).resolved(has_metadata), name) == value, name
    resolved = config.resolved(has_metadata=False)
    assert resolved.resolved(has_metadata=True) is resolved  # nothing left to decide: returned as it is
    for preset in (KGPSConfig.paper(), KGPSConfig.per_prompt(), ExperimentalConfig.paper()):
        assert preset.resolved(has_metadata=False) is preset  # the presets decide every field themselves
    assert type(ExperimentalConfig().resolved(has_metadata=True)) is ExperimentalConfig


def test_a_column_read_as_prior_rates_is_not_also_a_feature_column():
    with pytest.raises(ValueError, match=r"prior_column='solve_rate' is also in feature_columns=\['level', "):
        KGPSConfig(feature_columns=["level", "solve_rate"], prior_column="solve_rate")


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
    unset = r"^shared_variance unset \(1.0 wherever.*observation='logit'.*Set shared_variance=0"
    with pytest.raises(ValueError, match=unset):
        KGPSConfig(observation="logit")
    with pytest.raises(ValueError, match=r"^shared_variance > 0 .*observation='logit'.*Set shared_variance=0"):
        KGPSConfig(observation="logit", shared_variance=1.0)


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
    # KGPSConfig: the default's fields and the paper's preset, at most 20; no field that only a variant left out or
    # one of the paper's ablations uses.
    assert len(dataclasses.fields(KGPSConfig)) <= 20
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


# Every value the field checks refused when they were declared as argparse actions, with its message, and the bounds
# they accepted (recorded from that implementation; for a field added since, from its check when it was added): the
# plain checks in `__post_init__` must say exactly the same.
RECORDED = json.loads((Path(__file__).parents[1] / "data" / "config_refusals.json").read_text())
CLASSES = {"KGPSConfig": KGPSConfig, "ExperimentalConfig": ExperimentalConfig}


def _decoded(value):
    if isinstance(value, dict) and "float" in value:
        return float(value["float"])
    if isinstance(value, dict) and "tuple" in value:
        return tuple(_decoded(v) for v in value["tuple"])
    return value


@pytest.mark.parametrize("row", RECORDED["refused"], ids=lambda row: f"{row['field']}={row['value']!r}")
def test_every_refusal_keeps_its_message_naming_the_field_the_value_and_a_fix(row):
    with pytest.raises(ValueError) as error:
        CLASSES[row["config"]](**{row["field"]: _decoded(row["value"])})
    assert str(error.value) == row["message"]


def test_the_bounds_a_field_keeps_in_are_accepted():
    for row in RECORDED["accepted"]:
        config = CLASSES[row["config"]](**{row["field"]: row["value"]})
        assert getattr(config, row["field"]) == row["value"], row


def test_every_field_but_a_flag_refuses_what_it_does_not_accept():
    refused = {row["field"] for row in RECORDED["refused"]}
    flags = {f.name for f in dataclasses.fields(ExperimentalConfig) if f.type is bool}
    assert {f.name for f in dataclasses.fields(ExperimentalConfig)} - refused == flags
    # None, where it is the default or one of the field's annotated types, stays accepted; elsewhere it is refused
    # (the annotations, since TRL's parser rewrites a parsed field's `type`)
    hints = typing.get_type_hints(ExperimentalConfig)
    for f in dataclasses.fields(ExperimentalConfig):
        if f.default is None or type(None) in typing.get_args(hints[f.name]):
            assert getattr(ExperimentalConfig(**{f.name: None}), f.name) is None, f.name
        elif f.name not in flags:
            assert any(row["field"] == f.name and row["value"] is None for row in RECORDED["refused"]), f.name


def test_the_checks_are_plain_code_not_argparse_actions():
    package = Path(trl_kgps.__file__).parent
    assert not [path for path in package.rglob("*.py") if "_StoreAction" in path.read_text()]
    assert not [f.name for f in dataclasses.fields(ExperimentalConfig) if "action" in f.metadata]


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


def test_argparse_shows_each_fields_help_and_parses_its_values():
    from transformers import HfArgumentParser

    parser = HfArgumentParser(KGPSConfig)
    for f in dataclasses.fields(KGPSConfig):
        action = parser._option_string_actions[f"--{f.name}"]
        assert action.help == f.metadata["help"], f.name
    (config,) = parser.parse_args_into_dataclasses(["--feature_columns", "level", "type", "--quadrature_points", "4"])
    assert (config.feature_columns, config.quadrature_points) == (["level", "type"], 4)
    (config,) = parser.parse_args_into_dataclasses([])  # unset: KGPS finds the metadata columns
    assert config.feature_columns is None


def test_the_docstring_lists_every_parameter_with_its_type_and_default():
    doc = KGPSConfig.__doc__
    for f in dataclasses.fields(KGPSConfig):
        default = f'"{f.default}"' if isinstance(f.default, str) else f.default
        assert re.search(
            rf"\n        {f.name} \(`[^\n]*`, \*optional\*, defaults to `{re.escape(str(default))}`\):", doc
        ), f.name


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("gamma", np.float32(0.25), 0.25),
        ("initial_variance", np.float64(2.0), 2.0),
        ("warmup_epochs", np.int64(1), 1),
        ("quadrature_points", np.int32(7), 7),
        ("candidates", np.int64(16), 16),
        ("success_threshold", np.float16(0.5), 0.5),
        ("shared_noise_share", np.float32(0.5), 0.5),
        ("delta_norm_sample", np.float32(0.25), 0.25),
    ],
)
def test_a_numpy_number_of_the_right_kind_is_taken_as_the_python_number_it_holds(field, value, expected):
    # From a sweep's `np.linspace`/`np.arange`, or a value read back with numpy: held as Python's, as if typed.
    for config in (KGPSConfig(**{field: value}), dataclasses.replace(KGPSConfig(), **{field: value})):
        assert getattr(config, field) == expected and type(getattr(config, field)) is type(expected)
    config = KGPSConfig()
    setattr(config, field, value)
    assert type(getattr(config, field)) is type(expected)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("gamma", np.True_, f"gamma must be a finite number >= 0.0 and <= 1e+12, got {np.True_!r}"),
        ("warmup_epochs", np.float32(1.0), "warmup_epochs must be an integer >= 0, got 1.0"),
        ("quadrature_points", np.float64(5.0), "quadrature_points must be an integer >= 2, got 5.0"),
        (
            "initial_variance",
            np.float32("nan"),
            "initial_variance must be a finite number > 0.0 and <= 1e+12, got nan",
        ),
        ("warmup_epochs", np.int64(-1), "warmup_epochs must be an integer >= 0, got -1"),
    ],
)
def test_a_numpy_value_of_the_wrong_kind_is_still_refused_naming_it(field, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        KGPSConfig(**{field: value})
