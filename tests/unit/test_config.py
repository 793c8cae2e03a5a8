import dataclasses

import pytest

from trl_kgps import KGPSConfig


def test_the_paper_preset_holds_the_papers_hyperparameters():
    config = KGPSConfig.paper()
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
        ("feature_columns", []),
        ("feature_columns", ["level", "level"]),
        ("feature_columns", ["level", 3]),
        ("shared_variance", -1.0),
        ("shared_noise_share", 1.5),
        ("residual_adaptation", -0.05),
    ],
)
def test_bad_values_name_the_field_the_value_and_a_fix(field, value):
    with pytest.raises(ValueError, match=field) as error:
        KGPSConfig(**{field: value})
    assert repr(value) in str(error.value)
    assert any(word in str(error.value) for word in ("use", "Use")), str(error.value)


def test_ablations_are_valid_configs():
    KGPSConfig(process_noise_power=2.0)
    KGPSConfig(fixed_process_noise=0.01)
    KGPSConfig(utility="point")
    KGPSConfig(warmup_epochs=0)


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
            "--utility",
            "point",
            "--fixed_process_noise",
            "0.05",
        ]
    )
    assert (kgps.gamma, kgps.utility, kgps.fixed_process_noise) == (0.2, "point", 0.05)
    assert kgps.initial_variance == KGPSConfig().initial_variance
    assert grpo.output_dir == str(tmp_path)
    with pytest.raises(SystemExit):
        parser.parse_args_into_dataclasses(["--output_dir", str(tmp_path), "--use_cpu", "--utility", "mean"])


def test_a_variant_name_with_a_column_reads_that_column_as_its_feature():
    from trl_kgps.demo.variants import VARIANTS, variant_config

    assert variant_config("kgps") is VARIANTS["kgps"]
    by_level = variant_config("kgps+wide_shared:level")
    assert by_level == dataclasses.replace(VARIANTS["kgps+wide_shared"], feature_columns=["level"])
    assert variant_config("uniform") is None and variant_config("kgps:") is None and variant_config("x:level") is None
