"""Inputs that were accepted and failed later, or failed with a misleading message: each is now refused up front."""

import copy
import dataclasses
import os
import pickle
import re

import numpy as np
import pytest
import torch

from trl_kgps import KGPSConfig, KGPSSelector, difficulty_table, load_selector
from trl_kgps.engine import state_file
from trl_kgps.sampler import KGPSRepeatSampler
from trl_kgps.selectors import DPSSelector, GRESOSelector, MoPPSSelector, UniformSelector
from trl_kgps.selectors.experimental import ExperimentalConfig


# Each flag with the config class that holds it.
FLAGS = (("candidate_pass", ExperimentalConfig), ("restart_on_missing_state", KGPSConfig))


# An assignment after construction


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("gamma", -5.0, r"^gamma must be a finite number >= 0.0 and <= 1e\+12, got -5.0: use"),
        ("initial_variance", 0.0, r"^initial_variance must be a finite number > 0.0"),
        ("quadrature_points", 1, r"^quadrature_points must be an integer >= 2, got 1"),
        ("selection", "greedy", r"^selection must be one of \('sample', 'top'\), got 'greedy'"),
        ("feature_columns", ["level", "level"], r"^feature_columns must be distinct column names"),
        ("restart_on_missing_state", "yes", r"^restart_on_missing_state must be True or False, got 'yes'"),
    ],
)
def test_an_assigned_field_is_checked_as_at_construction_and_keeps_its_value(field, value, message):
    # Before, `config.gamma = -5.0` was accepted and the selector built from it gave negative variances.
    config = KGPSConfig()
    before = dataclasses.asdict(config)
    with pytest.raises(ValueError, match=message):
        setattr(config, field, value)
    assert dataclasses.asdict(config) == before


@pytest.mark.parametrize(
    "start, field, value, message",
    [
        (
            {"feature_columns": ["level"]},
            "shared_variance",
            0.0,
            r"feature_columns=\['level'\] needs shared_variance > 0 \(it is 0\).*Set shared_variance=1.0",
        ),
        (
            {"shared_variance": 0.0},
            "feature_columns",
            "level",
            r"feature_columns=\['level'\] needs shared_variance > 0 \(it is 0\)",
        ),
        ({}, "observation", "logit", r"observation='logit'.*Set shared_variance=0"),
        ({"experimental": True}, "shared_drift", 0.1, r"shared_drift=0.1.*Set shared_variance=0"),
        (KGPSConfig.paper().__dict__, "shared_variance", 1.0, r"observation='logit'.*Set shared_variance=0"),
    ],
)
def test_an_assignment_is_checked_against_the_other_fields(start, field, value, message):
    start = dict(start)
    config = (ExperimentalConfig if start.pop("experimental", False) else KGPSConfig)(**start)
    before = dataclasses.asdict(config)
    with pytest.raises(ValueError, match=message):
        setattr(config, field, value)
    assert dataclasses.asdict(config) == before


def test_an_accepted_assignment_is_normalised_as_at_construction():
    config = KGPSConfig()
    config.feature_columns = "level"
    assert config.feature_columns == ["level"]
    config.feature_columns = ("level", "type")
    assert config.feature_columns == ["level", "type"]
    config.gamma, config.quadrature_points, config.restart_on_missing_state = 0.2, 7, np.bool_(True)
    assert (config.gamma, config.quadrature_points) == (0.2, 7) and config.restart_on_missing_state is True
    config.feature_columns = None
    config.shared_variance = 0.0  # one step at a time, each valid
    config.observation = "logit"
    assert config == KGPSConfig(
        shared_variance=0.0, observation="logit", gamma=0.2, quadrature_points=7, restart_on_missing_state=True
    )
    config.note = "not a field"  # other attributes are not fields: set as before
    assert config.note == "not a field"


def test_replace_asdict_pickle_and_copies_still_work():
    config = KGPSConfig.paper(gamma=0.05, feature_columns=[])
    assert dataclasses.replace(config, gamma=0.3).gamma == 0.3 and config.gamma == 0.05
    with pytest.raises(ValueError, match="gamma must be"):
        dataclasses.replace(config, gamma=-1.0)
    assert dataclasses.asdict(config)["gamma"] == 0.05
    for clone in (pickle.loads(pickle.dumps(config)), copy.deepcopy(config), copy.copy(config)):
        assert clone == config and clone is not config
        with pytest.raises(ValueError, match="gamma must be"):
            clone.gamma = -5.0  # a copy is checked too
        assert clone.gamma == 0.05


# quadrature_points' upper bound


def test_quadrature_points_past_what_hermgauss_holds_are_refused_with_the_bound():
    # Before, 10**6 was accepted and select() asked numpy for a 10**6 x 10**6 companion matrix (8 TB).
    for build in (KGPSConfig, KGPSConfig.paper):
        with pytest.raises(ValueError) as error:
            build(quadrature_points=10**6)
        message = str(error.value)
        assert message.startswith("quadrature_points must be an integer <= 100, got 1000000: use"), message
        assert "5 (the paper)" in message
    config = KGPSConfig.paper(quadrature_points=100)  # the bound itself is accepted, and scores
    selector = KGPSSelector(8, config)
    selector.initialize(range(8), [0, 1, 2, 3, 4, 5, 6, 7], [8] * 8)
    assert selector.select(3).shape == (3,)


# The flags


@pytest.mark.parametrize("flag, config_class", FLAGS)
@pytest.mark.parametrize("value", ["yes", "False", 1, 0, None, 1.0])
def test_a_flag_accepts_only_a_bool(flag, config_class, value):
    message = rf"^{flag} must be True or False, got {re.escape(repr(value))}: use"
    with pytest.raises(ValueError, match=message):
        config_class(**{flag: value})
    config = config_class()
    with pytest.raises(ValueError, match=message):
        setattr(config, flag, value)
    assert getattr(config, flag) is False


@pytest.mark.parametrize("flag, config_class", FLAGS)
def test_a_flag_takes_a_bool_or_a_numpy_bool_and_parses_from_the_command_line(flag, config_class):
    assert getattr(config_class(**{flag: True}), flag) is True
    assert getattr(config_class(**{flag: np.bool_(True)}), flag) is True  # as a plain bool
    from transformers import HfArgumentParser

    parser = HfArgumentParser(config_class)
    for argv, expected in (([f"--{flag}"], True), ([f"--{flag}", "false"], False), ([], False)):
        (config,) = parser.parse_args_into_dataclasses(argv)
        assert getattr(config, flag) is expected, argv


# delta_norm of predict


def selectors():
    return [
        KGPSSelector(6, KGPSConfig(), seed=1),
        KGPSSelector(6, KGPSConfig.paper(), seed=1),
        UniformSelector(6, seed=1),
        MoPPSSelector(6, seed=1),
        GRESOSelector(6, seed=1),
        DPSSelector(6, seed=1),
    ]


def same_state(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize("selector", selectors(), ids=lambda s: type(s).__name__)
@pytest.mark.parametrize(
    "norm",
    ["0.5", b"0.5", True, False, None, ["0.1", "0.2"], [0.1, None], np.array([True]), np.array(["0.5"])],
    ids=repr,
)
def test_predict_refuses_a_norm_that_is_not_a_number(selector, norm):
    # Before, "0.5" and True were read as the numbers 0.5 and 1.0 (and None as NaN, with a message about a diverged
    # optimizer step).
    selector.update([1, 2], [1, 3], [4, 4])
    before = selector.state_dict()
    with pytest.raises(ValueError) as error:
        selector.predict(norm)
    message = str(error.value)
    assert message.startswith("delta_norm must be a number or a 1-D sequence of numbers"), message
    assert repr(norm) in message and "float" in message, message
    same_state(selector.state_dict(), before)


@pytest.mark.parametrize("selector", selectors(), ids=lambda s: type(s).__name__)
def test_predict_still_takes_python_numpy_and_torch_numbers(selector):
    for norm in (0.5, 1, np.float32(0.5), np.float64(0.5), np.int64(2), np.array(0.5), [0.1, 2], (0.1,)):
        selector.predict(norm)
    selector.predict(np.array([0.1, 0.2], dtype=np.float16))
    selector.predict(torch.tensor(0.5))
    selector.predict(torch.tensor([0.1, 0.2]))
    selector.predict([torch.tensor(0.1), torch.tensor(0.2)])
    selector.predict([])


# load_selector and difficulty_table on local paths


@pytest.fixture
def saved(tmp_path):
    """A folder holding the kgps_state.npz of a selector that saw a few outcomes, written as a trainer writes it."""
    selector = KGPSSelector(4, KGPSConfig(gamma=0.3), seed=3)
    selector.update([1, 2], [1, 3], [4, 4])
    sampler = KGPSRepeatSampler(range(4), mini_repeat_count=2, batch_size=2, selector=selector)
    state_file.write(tmp_path / "run", selector, sampler.state_dict())
    return tmp_path / "run", selector


@pytest.fixture
def no_hub(monkeypatch):
    """Fails a test that reaches the Hub."""
    import huggingface_hub

    def refuse(*args, **kwargs):
        raise AssertionError(f"the Hub was asked for {args}")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)


@pytest.mark.parametrize("as_type", [str, os.fspath, lambda path: path], ids=["str", "fspath", "Path"])
def test_a_path_to_the_state_file_loads_as_its_folder_would(saved, no_hub, as_type):
    folder, selector = saved
    path = as_type(folder / "kgps_state.npz")
    same_state(load_selector(path).state_dict(), selector.state_dict())
    same_state(KGPSSelector.from_pretrained(path).state_dict(), selector.state_dict())
    assert difficulty_table(path).to_dict() == difficulty_table(folder).to_dict()


@pytest.mark.parametrize("read", [load_selector, difficulty_table, KGPSSelector.from_pretrained])
@pytest.mark.parametrize(
    "where",
    ["./missing_folder", "missing_folder/kgps_state.npz", "run/kgps_state.npz/x", "absent.npz", "relative/a/b"],
)
def test_a_missing_local_path_names_the_path_and_what_is_expected_before_any_hub_call(
    saved, no_hub, monkeypatch, read, where
):
    # Before, each was handed to the Hub, whose repo-id check failed first ("Repo id must be in the form ...").
    folder, _ = saved
    monkeypatch.chdir(folder.parent)
    for path in (where, str(folder.parent / where), folder.parent / where):
        with pytest.raises(FileNotFoundError) as error:
            read(path)
        message = str(error.value)
        assert repr(os.fspath(path)) in message and "does not exist" in message, message
        assert "a folder holding kgps_state.npz" in message and "Hub repo id" in message, message


@pytest.mark.parametrize("read", [load_selector, difficulty_table])
def test_a_local_file_other_than_the_state_file_is_refused_by_name_before_any_hub_call(saved, no_hub, read):
    folder, _ = saved
    other = folder / "model.safetensors"
    other.write_bytes(b"not a state")
    renamed = folder / "state.npz"
    renamed.write_bytes((folder / "kgps_state.npz").read_bytes())
    for path in (other, str(renamed)):
        with pytest.raises(ValueError) as error:
            read(path)
        message = str(error.value)
        assert repr(os.fspath(path)) in message and "is a file, not" in message, message
        assert "a folder holding kgps_state.npz" in message and "Hub repo id" in message, message


def test_a_repo_id_that_is_no_local_path_still_goes_to_the_hub(tmp_path, monkeypatch):
    import huggingface_hub

    asked = []

    def download(repo_id, filename, **kwargs):
        asked.append((repo_id, filename))
        raise OSError("offline")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.chdir(tmp_path)
    for repo_id in ("someone/kgps-run", "kgps-run", "someone/run.v2"):
        with pytest.raises(OSError, match=rf"{re.escape(repr(repo_id))} is not a local directory"):
            load_selector(repo_id)
    assert asked == [(repo_id, "kgps_state.npz") for repo_id in ("someone/kgps-run", "kgps-run", "someone/run.v2")]
