"""The seam with TRL is one table per trainer: the checks read it and docs/trl.md shows it as it is."""

import inspect
from pathlib import Path

import pytest
from transformers import Trainer

from trl_kgps.adapters import async_trl_private, trl_private
from trl_kgps.adapters.seam import UsedMember, markdown


DOCS = Path(__file__).resolve().parents[2] / "docs" / "trl.md"


@pytest.mark.parametrize(
    "members, marker", [(trl_private.SEAM, "seam"), (async_trl_private.USED_MEMBERS, "async-seam")]
)
def test_the_docs_show_each_seam_table_as_the_checks_read_it(members, marker):
    page = DOCS.read_text()
    shown = page.split(f"<!-- {marker}:start -->\n", 1)[1].split(f"\n<!-- {marker}:end -->", 1)[0]
    assert shown == markdown(members)
    assert len(shown.splitlines()) == len(members) + 2


def test_markdown_names_the_checked_parameters_of_each_member():
    table = markdown((UsedMember("A.f", ("x", "y"), use="wrapped"), UsedMember("A.g", use="read")))
    assert table.splitlines()[2:] == ["| `A.f(x, y)` | wrapped |", "| `A.g` | read |"]


def test_every_member_the_grpo_adapter_replaces_or_wraps_is_in_the_checked_table():
    source = inspect.getsource(trl_private)
    wrapped = {line.split('"')[1] for line in source.splitlines() if line.strip().startswith("wrap(trainer, ")}
    checked = {member.path.rpartition(".")[2] for member in trl_private.SEAM if member.parameters is not None}
    assert wrapped == checked == {
        "get_train_dataloader", "_get_train_sampler", "_calculate_rewards", "_load_optimizer_and_scheduler",
        "save_model", "create_model_card",
    }  # fmt: skip


def test_a_trainer_whose_checked_member_has_another_signature_is_refused_naming_it():
    from trl import GRPOTrainer

    class Changed(GRPOTrainer):
        def _calculate_rewards(self, inputs, prompts, completions):  # TRL dropped `completion_ids_list`
            return None

    trainer = Changed.__new__(Changed)
    with pytest.raises(TypeError, match=r"_calculate_rewards\(inputs, prompts, completions, completion_ids_list\)"):
        trl_private.check(trainer)
    assert issubclass(Changed, Trainer)


@pytest.mark.parametrize("members", [trl_private.SEAM, async_trl_private.USED_MEMBERS], ids=["grpo", "async"])
def test_each_use_names_what_its_check_reads_since_the_docs_table_shows_the_use_alone(members):
    # Before, `_AsyncRolloutLoop.__init__`'s use read "KGPS's loop reads these once built", its `names` not shown.
    unnamed = [(m.path, name) for m in members for name in m.names if f"`{name}`" not in m.use]
    assert unnamed == []
