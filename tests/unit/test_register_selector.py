"""`register_selector`: a user's selector picked by name, as the built-in ones are."""

import numpy as np
import pytest

from trl_kgps import register_selector
from trl_kgps.adapters.dataset_columns import selector_for
from trl_kgps.selectors.baselines import UniformSelector
from trl_kgps.selectors.registry import SELECTORS, class_named


class EveryOther(UniformSelector):
    """TRL's order, a selector of the user's own."""


@pytest.fixture
def registered():
    register_selector("every_other", EveryOther)
    yield
    del SELECTORS["every_other"]


def test_a_registered_selector_is_built_by_name_and_found_by_its_class_name(registered):
    built = selector_for("every_other", range(10), None, seed=3)
    assert type(built) is EveryOther and built.num_prompts == 10
    assert class_named("EveryOther") is EveryOther
    register_selector("every_other", EveryOther)  # again, the same class: nothing changes
    assert np.array_equal(built.select(3), selector_for("every_other", range(10), None, seed=3).select(3))


@pytest.mark.parametrize(
    "name, cls, error, match",
    [
        ("uniform", EveryOther, ValueError, r"'uniform' names UniformSelector already: pick another name"),
        ("", EveryOther, ValueError, r"name must be a non-empty string, got ''"),
        ("mine", object, TypeError, r"lacks \['select', 'initialize', 'update', 'predict'"),
        ("mine", EveryOther(3), TypeError, r"a selector is a class with the PromptSelector methods"),
    ],
)
def test_a_name_or_class_it_cannot_register_is_refused_before_the_registry_changes(name, cls, error, match):
    before = dict(SELECTORS)
    with pytest.raises(error, match=match):
        register_selector(name, cls)
    assert SELECTORS == before
