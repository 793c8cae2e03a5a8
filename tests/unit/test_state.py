import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pytest

from trl_kgps import KGPSConfig, KGPSSelector
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector, experimental


def busy_selector(seed=0, N=400):
    rng = np.random.default_rng(seed)
    selector = KGPSSelector(N, KGPSConfig(), seed=seed)
    selector.initialize(np.arange(N), rng.binomial(8, rng.uniform(size=N)), np.full(N, 8))
    for _ in range(10):
        batch = selector.select(16)
        selector.predict(rng.uniform(0, 1))
        selector.update(batch, rng.binomial(8, 0.5, 16), np.full(16, 8))
    return selector


def continue_run(selector, rounds=15, seed=99):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        batch = selector.select(16)
        out.append(batch)
        selector.predict(rng.uniform(0, 1))
        selector.update(batch, rng.binomial(8, 0.5, 16), np.full(16, 8))
    return np.concatenate(out)


def test_round_trip_continues_bit_for_bit():
    original = busy_selector()
    state = pickle.loads(pickle.dumps(original.state_dict()))
    restored = KGPSSelector(original.num_prompts, KGPSConfig(), seed=12345)
    restored.load_state_dict(state)
    np.testing.assert_array_equal(restored.mean, original.mean)
    np.testing.assert_array_equal(restored.variance, original.variance)
    np.testing.assert_array_equal(continue_run(restored), continue_run(original))
    np.testing.assert_array_equal(restored.mean, original.mean)
    np.testing.assert_array_equal(restored.variance, original.variance)


def test_state_dict_is_a_snapshot_not_a_view():
    selector = busy_selector()
    state = selector.state_dict()
    state["mean"][:] = 99.0
    state["variance_base"][:] = 99.0
    assert selector.mean.max() < 99.0 and selector.variance.max() < 99.0


def test_mean_is_read_only():
    selector = KGPSSelector(3)
    with pytest.raises(ValueError):
        selector.mean[0] = 1.0
    selector.variance[0] = 5.0  # a fresh array: writing to it changes nothing
    assert selector.variance[0] == selector.config.initial_variance + selector.config.shared_variance


def test_shapes_and_dtypes():
    selector = busy_selector(N=50)
    assert selector.mean.shape == selector.variance.shape == selector.scores().shape == (50,)
    assert selector.predicted_success().shape == (50,)
    assert selector.predicted_success([3, 4]).shape == (2,)
    assert selector.select(7).dtype == np.int64


def as_a_development_build_wrote_it(selector, version: int) -> dict:
    """
    `selector`'s state as a development build of trl-kgps 0.3 wrote it, recording no release: versions 4 and 5 in the
    layout of today's version 3 (under their own number), version 3 with every selector's state holding the pass,
    gamma's calibration and the group size last seen, and its config every variant's field and its class, and not
    `prompt_key`.
    """
    state = {key: value for key, value in selector.state_dict().items() if key != "trl_kgps"}
    if version != 3:
        return {**state, "version": version}
    config = {k: v for k, v in dataclasses.asdict(experimental(selector.config)).items() if k != "prompt_key"}
    extra = {"pass_order": np.empty(0, np.int64), "pass_position": 0, "gamma_scale": 1.0, "group_size_seen": 8}
    return {**extra, **state, "config": config, "config_class": type(selector.config).__name__}


def test_the_state_0_3_writes_is_version_3_and_loads_bit_for_bit():
    plain = busy_selector()
    variant = ExperimentalSelector(400, ExperimentalConfig(candidate_pass=True, candidates=4.0), seed=2)
    continue_run(variant, rounds=3)
    for selector in (plain, variant):
        state = selector.state_dict()
        assert state["version"] == 3
        restored = type(selector).from_state_dict(pickle.loads(pickle.dumps(state)))
        np.testing.assert_array_equal(continue_run(restored), continue_run(selector))
    # a variant's state holds fields a KGPSSelector does not read: refused, naming the class that reads them
    with pytest.raises(ValueError, match=r"its config holds \['candidate_pass'.*ExperimentalSelector"):
        KGPSSelector.from_state_dict(variant.state_dict())


@pytest.mark.parametrize("release, preset", [("0.1", KGPSConfig.paper()), ("0.2", KGPSConfig.per_prompt())])
def test_the_states_of_0_1_and_0_2_load_with_the_method_they_ran_gamma_fixed(release, preset):
    from trl_kgps import load_selector

    # tests/data's checkpoints, written by those releases: versions 1 and 2, before gamma's calibration
    selector = load_selector(Path(__file__).parents[1] / "data" / f"trl_kgps_{release}_run" / "checkpoint-4")
    assert type(selector) is KGPSSelector and selector.config == preset.resolved(has_metadata=True)
    assert selector.config.process_noise_adaptation == 0.0 and selector.gamma == preset.gamma
    assert selector.state_dict()["version"] == 3 and selector.state_dict()["gamma_scale"] == 1.0


@pytest.mark.parametrize("version", [3, 4, 5])
@pytest.mark.parametrize("selector_class", [KGPSSelector, ExperimentalSelector])
def test_a_state_of_a_development_build_is_refused_naming_its_version_and_the_fix(version, selector_class, tmp_path):
    from trl_kgps import load_selector
    from trl_kgps.engine import state_file

    saved = selector_class(400, seed=2)
    continue_run(saved, rounds=3)
    state = as_a_development_build_wrote_it(saved, version)
    # Loaded, not resumed: the fix is the build that wrote it, not a checkpoint's kgps_state.npz moved out.
    refusal = (
        rf"state version {version} was written by a development build of trl-kgps 0\.3 \(0\.3\.0\.dev\).*versions 1 "
        r"\(trl-kgps 0\.1\), 2 \(0\.2\) and 3 \(0\.3\)\. Load it with the build that wrote it\.$"
    )
    with pytest.raises(ValueError, match=refusal):
        selector_class.from_state_dict(state)
    selector = selector_class(400, seed=5)
    before = selector.state_dict()
    with pytest.raises(ValueError, match=refusal):
        selector.load_state_dict(state)
    assert pickle.dumps(selector.state_dict()) == pickle.dumps(before)  # unchanged
    arrays, meta = state_file.pack_selector(state)
    state_file.save(str(tmp_path / "kgps_state.npz"), arrays, {"selector": meta, "selector_class": "KGPSSelector"})
    with pytest.raises(ValueError, match=refusal) as refused:
        load_selector(tmp_path)
    assert "kgps_state.npz out" not in str(refused.value) and "restart_on_missing_state" not in str(refused.value)


def test_every_state_records_the_release_that_wrote_it_which_tells_0_3_from_a_development_build(tmp_path):
    from trl_kgps import __version__, load_selector
    from trl_kgps.engine import state_file
    from trl_kgps.engine.ledger import BatchLedger

    saved = busy_selector(N=40)
    assert saved.state_dict()["trl_kgps"] == __version__
    state_file.write(tmp_path, saved, BatchLedger(40, 2).state_dict())
    _, meta = state_file.load(str(tmp_path / "kgps_state.npz"))
    assert meta["trl_kgps"] == meta["selector"]["trl_kgps"] == __version__
    # A version 3 whose config lacks prompt_key (as the development builds' did) that records its release is 0.3's.
    state = saved.state_dict()
    state["config"] = {k: v for k, v in state["config"].items() if k != "prompt_key"}
    restored = KGPSSelector.from_state_dict(state)
    np.testing.assert_array_equal(continue_run(restored), continue_run(saved))
    # A later release's version is refused naming that release.
    with pytest.raises(ValueError, match=r"version 4, but this trl-kgps \(0\.3\.0\).*Load it with trl-kgps 0\.4\.0, "):
        KGPSSelector.from_state_dict({**saved.state_dict(), "version": 4, "trl_kgps": "0.4.0"})
    assert type(load_selector(tmp_path)) is KGPSSelector


# KGPSSelector states trl-kgps 0.2 (commit d9824bc) saved with its variants of KGPS, and the rounds it chose next.
RUN_0_2_VARIANTS = Path(__file__).parents[1] / "data" / "trl_kgps_0.2_variants"
VARIANTS_0_2 = {
    "mixed_pass": dict(objective="mixed", candidate_pass=True, candidates=4.0),
    "thompson": dict(selection="thompson", candidates=4.0),
    "point_drift": dict(utility="point", shared_drift=0.1, process_noise_power=2.0, group_size=6),
}


def drive(selector, rounds: int, seed: int) -> np.ndarray:
    """`rounds` rounds of 4 prompts, 8 rollouts each, seeded: how the states of `RUN_0_2_VARIANTS` were made."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(rounds):
        batch = selector.select(4)
        batches.append(batch)
        selector.predict(rng.uniform(0.1, 1.0))
        selector.update(batch, rng.binomial(8, 0.4, 4), np.full(4, 8))
    return np.stack(batches)


def assert_continues_as_0_2_did(selector, variant: str) -> None:
    with np.load(RUN_0_2_VARIANTS / variant / "continued.npz") as continued:
        np.testing.assert_array_equal(drive(selector, 6, seed=2), continued["batches"])
        # numpy's exp and log may round otherwise on another CPU (as assert_same_beliefs in test_resume.py says)
        np.testing.assert_allclose(selector.mean, continued["mean"], rtol=1e-6, atol=0)
        np.testing.assert_allclose(selector.variance, continued["variance"], rtol=1e-6, atol=0)


@pytest.mark.parametrize("variant", list(VARIANTS_0_2))
def test_a_state_0_2_saved_with_a_variant_loads_as_an_experimental_selector_and_continues_as_0_2_did(variant):
    from trl_kgps import load_selector

    directory = RUN_0_2_VARIANTS / variant
    selector = load_selector(directory)
    assert type(selector) is ExperimentalSelector
    assert {name: getattr(selector.config, name) for name in VARIANTS_0_2[variant]} == VARIANTS_0_2[variant]
    assert_continues_as_0_2_did(selector, variant)
    assert type(ExperimentalSelector.from_pretrained(directory)) is ExperimentalSelector
    with pytest.raises(ValueError, match=r"holds an ExperimentalSelector \(trl-kgps 0\.2 saved it as a KGPSSelector "):
        KGPSSelector.from_pretrained(directory)


@pytest.mark.parametrize("variant", list(VARIANTS_0_2))
def test_a_checkpoint_0_2_saved_with_a_variant_resumes_with_its_experimental_config(variant):
    from trl_kgps.adapters import checkpoint
    from trl_kgps.sampler import KGPSRepeatSampler
    from trl_kgps.selectors import build_selector

    # 0.2's default was the per-prompt filter; KGPSCallback builds the ExperimentalSelector for an ExperimentalConfig.
    config = ExperimentalConfig.per_prompt(**VARIANTS_0_2[variant])
    selector = build_selector("kgps", 40, config, seed=0)
    sampler = KGPSRepeatSampler(range(40), mini_repeat_count=8, batch_size=4, selector=selector, warmup_epochs=0)
    checkpoint.resume(str(RUN_0_2_VARIANTS / variant), config, selector, sampler, prompts=lambda: None)
    assert type(selector) is ExperimentalSelector
    assert_continues_as_0_2_did(selector, variant)
    # With another method, the config to pass is an ExperimentalConfig: a KGPSConfig would build a KGPSSelector.
    wider = ExperimentalConfig.per_prompt(**VARIANTS_0_2[variant], initial_variance=1.0)
    other = build_selector("kgps", 40, wider, seed=0)
    sampler = KGPSRepeatSampler(range(40), mini_repeat_count=8, batch_size=4, selector=other, warmup_epochs=0)
    with pytest.raises(ValueError, match=r"pass KGPSCallback\(ExperimentalConfig\(initial_variance=4\.0[,)]"):
        checkpoint.resume(str(RUN_0_2_VARIANTS / variant), wider, other, sampler, prompts=lambda: None)
    # And a KGPSSelector is told the class and the fields the state was saved with.
    plain = KGPSSelector(40, KGPSConfig.per_prompt(candidates=4.0), seed=0)
    sampler = KGPSRepeatSampler(range(40), mini_repeat_count=8, batch_size=4, selector=plain, warmup_epochs=0)
    with pytest.raises(
        ValueError, match=r"holds an ExperimentalSelector \(trl-kgps 0\.2 saved it as a KGPSSelector with "
    ):
        checkpoint.resume(str(RUN_0_2_VARIANTS / variant), plain.config, plain, sampler, prompts=lambda: None)


def test_a_variant_s_state_loaded_by_a_kgps_selector_names_the_variants_that_read_its_fields():
    import dataclasses as dc

    @dc.dataclass
    class WiderConfig(KGPSConfig):
        width: float = 1.0

    class WiderSelector(KGPSSelector):
        config_class = WiderConfig

    state = WiderSelector(10, WiderConfig(width=2.0)).state_dict()
    with pytest.raises(ValueError, match=r"its config holds \['width'\].*: load it with [\w.]*\.WiderSelector$"):
        KGPSSelector.from_state_dict(state)


def test_a_kgps_selector_refuses_an_experimental_config_naming_the_class_that_reads_it():
    with pytest.raises(TypeError, match=r"fields \['candidate_pass'.*build .*ExperimentalSelector"):
        KGPSSelector(10, ExperimentalConfig())
    # and the state of a KGPSSelector holds nothing of the variants (gamma's calibration is the default's)
    assert not {"pass_order", "group_size_seen", "config_class"} & KGPSSelector(10).state_dict().keys()


def test_a_state_saved_with_other_prompt_features_is_refused_before_any_change():
    levels = np.arange(40) % 4
    saved = KGPSSelector(40, KGPSConfig(), seed=1, features={"level": levels})
    saved.update([0, 5, 9], [1, 4, 8], [8, 8, 8])
    other = KGPSSelector(40, KGPSConfig(), seed=1, features={"level": levels % 2})
    before = pickle.dumps(other.state_dict())
    with pytest.raises(ValueError, match=r"other prompt features than this selector's.*feature_columns it was saved"):
        other.load_state_dict(saved.state_dict())
    assert pickle.dumps(other.state_dict()) == before
    KGPSSelector(40, KGPSConfig(), seed=2, features={"level": levels}).load_state_dict(saved.state_dict())
