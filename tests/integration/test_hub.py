"""What `save_model` / `push_to_hub` carry: the KGPS state beside the model, the model card's section, and what loads
back from them — the selector, bit for bit, and the per-prompt difficulty table."""

import copy
import dataclasses
import re

import numpy as np
import pytest
from harness import build_model, train

from trl_kgps import KGPSConfig, KGPSSelector, difficulty_table, load_selector
from trl_kgps.selectors import ArcusSelector, DPSSelector, GRESOSelector, MoPPSSelector, UniformSelector
from trl_kgps.selectors.experimental import ExperimentalConfig, ExperimentalSelector


pytest.importorskip("trl")
huggingface_hub = pytest.importorskip("huggingface_hub")

NUM_PROMPTS, BATCH = 16, 2  # 8 completions a step, 4 per prompt
CONFIG = KGPSConfig(gamma=0.2, success_threshold=0.4)  # not the defaults, so the card shows what was used
CLASSES = {
    "kgps": KGPSSelector,
    "uniform": UniformSelector,
    "mopps": MoPPSSelector,
    "greso": GRESOSelector,
    "dps": DPSSelector,
    "arcus": ArcusSelector,
}


@pytest.fixture(scope="module", params=list(CLASSES))
def saved(request, tmp_path_factory, tokenizer):
    """A short run with `save_strategy="no"`, then `save_model(final)` and `create_model_card()`."""
    directory = tmp_path_factory.mktemp(request.param)
    trainer, kgps, _ = train(
        directory, build_model(tokenizer), tokenizer, NUM_PROMPTS, CONFIG, selector=request.param, max_steps=12
    )
    trainer.save_model(str(directory / "final"))
    trainer.create_model_card()
    return trainer, kgps, directory / "final"


def assert_same_selector(loaded, trained):
    assert type(loaded) is type(trained)
    expected, actual = trained.state_dict(), loaded.state_dict()
    assert actual.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, np.ndarray):
            assert actual[key].dtype == value.dtype, key
            np.testing.assert_array_equal(actual[key], value, err_msg=key)
        else:
            assert actual[key] == value, key
    # the same generator and beliefs: both choose the same next batches
    trained = copy.deepcopy(trained)
    for _ in range(3):
        np.testing.assert_array_equal(loaded.select(BATCH), trained.select(BATCH))


def test_save_model_writes_the_state_that_loads_back_bit_for_bit(saved):
    _, kgps, final = saved
    assert (final / "kgps_state.npz").is_file() and (final / "model.safetensors").is_file()
    loaded = type(kgps.selector).from_pretrained(final)
    assert_same_selector(loaded, kgps.selector)
    assert_same_selector(load_selector(str(final)), kgps.selector)
    if isinstance(kgps.selector, KGPSSelector):
        np.testing.assert_array_equal(loaded.mean, kgps.selector.mean)
        np.testing.assert_array_equal(loaded.variance, kgps.selector.variance)
        # No metadata column in this dataset: the one line keeps one filter per prompt, with the fields CONFIG sets.
        assert kgps.selector.config == KGPSConfig.per_prompt(candidates=0.0, gamma=0.2, success_threshold=0.4)
        assert loaded.config == kgps.selector.config and loaded.seed == kgps.selector.seed


def test_model_card_has_the_kgps_section_and_tags(saved):
    trainer, kgps, _ = saved
    card = huggingface_hub.ModelCard.load(trainer.args.output_dir + "/README.md")
    assert {"kgps", "trl-kgps", "grpo"} <= set(card.data.tags)
    section = card.text[card.text.index("## KGPS") :]
    assert card.text.index("## KGPS") < card.text.index("## Citations"), "the section sits above the citations"
    sampler = kgps.sampler
    assert sampler.ledger.batches_chosen > sampler.ledger.warmup_batches
    scored, ahead = kgps.ledger.batches_scored, sampler.ledger.batches_chosen - kgps.ledger.batches_scored
    assert sampler.ledger.warmup_batches == 0  # CONFIG has the default's: no warmup
    warmup = "all chosen by the selector"
    assert (
        f"rounds: {scored} generation batches rolled out and trained on, {warmup}; {ahead} more chosen but never "
        "rolled out (the trainer asks for the next batch while the current one trains, and training stopped first)"
    ) in section
    observed = round(kgps.coverage * NUM_PROMPTS)
    assert f"coverage: {observed} of {NUM_PROMPTS} prompts observed ({kgps.coverage:.1%})" in section
    used = getattr(kgps.selector, "config", CONFIG)  # KGPS's: what it ran with, its per-prompt filter here
    for field in dataclasses.fields(CONFIG):
        assert f"| `{field.name}` | `{getattr(used, field.name)!r}` |" in section
    assert f"`{type(kgps.selector).__name__}`" in section
    last = {key: value for entry in trainer.state.log_history for key, value in entry.items() if "kgps/" in key}
    for key in ("kgps/informative", "kgps/predicted_success"):
        assert re.search(rf"\| `{key}` \| {re.escape(f'{last[key]:.4g}')} \| 12 \|", section), key
    assert section.count("coverage") == 1  # the prompts observed, not also its mean over the last logged steps
    name = type(kgps.selector).__name__
    assert f'selector = {name}.from_pretrained("{trainer.args.output_dir}")' in section
    assert ("A baseline uses only" in section) == (name != "KGPSSelector")


def test_difficulty_table_live_and_saved_match_the_selector(saved):
    trainer, kgps, final = saved
    selector, sampler = kgps.selector, kgps.sampler
    live = kgps.difficulty_table()
    assert live.column_names == ["index", "prompt", "predicted_success", "variance", "times_selected"]
    assert live["prompt"] == list(trainer.train_dataset["prompt"])
    assert live["index"] == list(range(NUM_PROMPTS))
    np.testing.assert_array_equal(live["predicted_success"], selector.predicted_success())
    if isinstance(selector, KGPSSelector):
        np.testing.assert_array_equal(np.asarray(live["variance"], dtype=np.float32), selector.variance)
    else:
        assert np.isnan(live["variance"]).all()
    # the sampler's count against the batches the callback saw chosen
    chosen = np.bincount(np.concatenate(kgps.batches), minlength=NUM_PROMPTS)
    np.testing.assert_array_equal(live["times_selected"], chosen)
    assert sum(live["times_selected"]) == sampler.ledger.batches_chosen * sampler.batch_size

    saved_table = difficulty_table(final)
    assert saved_table.column_names == ["index", "predicted_success", "variance", "times_selected"]
    assert saved_table.features["times_selected"].dtype == "int32"
    for column in saved_table.column_names:
        np.testing.assert_array_equal(saved_table[column], live[column], err_msg=column)
    assert difficulty_table(final, prompts=trainer.train_dataset["prompt"])["prompt"] == live["prompt"]


def test_conversational_prompts_are_shown_as_their_last_user_message(saved):
    _, _, final = saved
    prompts = [
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"question {i}"}]
        for i in range(NUM_PROMPTS)
    ]
    prompts[3] = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what is shown?"}]}]
    table = difficulty_table(final, prompts=prompts)
    assert table["prompt"][0] == "question 0" and table["prompt"][3] == "what is shown?"
    with pytest.raises(ValueError, match=f"prompts has 3 entries, but the state is for {NUM_PROMPTS} prompts"):
        difficulty_table(final, prompts=prompts[:3])


def test_a_checkpoint_folder_loads_and_holds_the_state_of_its_step(tmp_path, model, tokenizer):
    trainer, kgps, _ = train(tmp_path, model, tokenizer, NUM_PROMPTS, max_steps=8, save_strategy="steps", save_steps=4)
    assert_same_selector(KGPSSelector.from_pretrained(tmp_path / "checkpoint-8"), kgps.selector)
    early = difficulty_table(str(tmp_path / "checkpoint-4"))
    assert 0 < sum(early["times_selected"]) < kgps.ledger.batches_chosen * BATCH
    np.testing.assert_array_equal(
        early["times_selected"],
        np.bincount(np.concatenate(kgps.batches[: sum(early["times_selected"]) // BATCH]), minlength=NUM_PROMPTS),
    )
    assert not list(tmp_path.glob("checkpoint-*/.kgps_state.*")), "no temporary file is left behind"


def test_missing_state_names_the_directory_and_the_fix(tmp_path):
    with pytest.raises(
        FileNotFoundError, match=rf"{re.escape(repr(str(tmp_path)))} holds no kgps_state.npz.*checkpoint-N"
    ):
        KGPSSelector.from_pretrained(tmp_path)


def test_state_of_another_selector_class_names_the_class_to_load_it_with(saved):
    _, kgps, final = saved
    name = type(kgps.selector).__name__
    other = MoPPSSelector if name == "KGPSSelector" else KGPSSelector
    with pytest.raises(
        ValueError, match=rf"holds an? {name}, not an? {other.__name__}\. Load it with `{name}\.from_pretrained"
    ):
        other.from_pretrained(final)


def test_an_unreachable_repo_names_the_repo_and_the_local_alternative(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads the variable once, when it is imported (transformers imported it already)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OSError, match=r"'someone/kgps-run' is not a local directory.*A local directory works too"):
        KGPSSelector.from_pretrained("someone/kgps-run", revision="main", cache_dir=tmp_path)


@pytest.mark.parametrize(
    "selector",
    [
        ExperimentalSelector(NUM_PROMPTS, ExperimentalConfig(gamma=0.3, utility="point"), seed=5),
        MoPPSSelector(NUM_PROMPTS, decay=0.9, candidate_ratio=2.0, target=0.4, decay_to_prior=False, seed=5),
        GRESOSelector(NUM_PROMPTS, target_zero_variance=0.5, step=0.02, seed=5),
        UniformSelector(NUM_PROMPTS, seed=5),
    ],
    ids=lambda selector: type(selector).__name__,
)
def test_from_state_dict_rebuilds_the_hyperparameters_and_the_seed(selector):
    selector.update([1, 2], [1, 0], [4, 4])
    assert_same_selector(type(selector).from_state_dict(selector.state_dict()), selector)
    with pytest.raises(ValueError, match=f"state does not say how to build a {type(selector).__name__}"):
        type(selector).from_state_dict({"num_prompts": NUM_PROMPTS})
