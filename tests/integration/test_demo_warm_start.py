"""
The demo's warm start ships with the package, so that every machine starts `trl-kgps train` from the same weights;
`--train_warm_start` keeps the recipe that made it.
"""

import hashlib
import json

import pytest
import torch
from safetensors.torch import load_file

from trl_kgps.demo.train import (
    DEMO_WARM_START,
    DEMO_WARM_START_RECIPE,
    TrainScriptArguments,
    _policy,
    demo_heldout_success,
)


RECORD = json.loads(DEMO_WARM_START.with_suffix(".json").read_text())


class _NoModel:
    model_name_or_path = None


def policy(**script_args):
    """The built-in model `trl-kgps train` starts from, with these flags and the default seed."""
    return _policy(TrainScriptArguments(**script_args), _NoModel(), seed=0)


def test_the_shipped_warm_start_is_the_one_its_record_describes():
    assert hashlib.sha256(DEMO_WARM_START.read_bytes()).hexdigest() == RECORD["sha256"]
    assert (RECORD["steps"], RECORD["seed"]) == DEMO_WARM_START_RECIPE == (TrainScriptArguments().warm_start_steps, 0)


def test_the_demo_starts_from_the_shipped_weights_on_any_machine():
    model, tokenizer = policy()
    shipped = load_file(DEMO_WARM_START)
    for name, tensor in model.state_dict().items():
        key = "model.embed_tokens.weight" if name == "lm_head.weight" else name  # tied to the embedding
        assert torch.equal(tensor, shipped[key]), name
    # the weights' exact held-out success, a teacher-forced pass: the same as where they were made, up to rounding
    assert demo_heldout_success(model, tokenizer) == pytest.approx(RECORD["heldout_success"], abs=1e-4)


@pytest.mark.slow
def test_train_warm_start_trains_a_comparable_network_from_the_recipe():
    trained, tokenizer = policy(train_warm_start=True)
    untrained, _ = policy(warm_start_steps=0)
    success = demo_heldout_success(trained, tokenizer)
    # on the CPU that made the shipped file, the very same bytes; elsewhere another network of about the same skill
    assert success == pytest.approx(RECORD["heldout_success"], abs=0.1)
    assert demo_heldout_success(untrained, tokenizer) < 0.01


def test_another_recipe_trains_here():
    shipped, _ = policy()
    other, _ = policy(warm_start_steps=3)
    assert not torch.equal(shipped.model.embed_tokens.weight, other.model.embed_tokens.weight)
