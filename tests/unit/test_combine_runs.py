"""`real_cpu.py --combine`: a sweep run one seed at a time becomes the results file of the sweep run at once."""

import sys
from pathlib import Path

import pytest


sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import real_cpu  # noqa: E402


ENVIRONMENT = dict(commit="e8485ae437c679010bc499dfb067d3ab42df8a1d", cpu="Intel(R) Xeon(R) Processor", cores=2)


def piece(seed: int, out: str, methods=("uniform", "one_line"), environment=ENVIRONMENT, rate=2e-4) -> dict:
    command = f"python benchmarks/real_cpu.py --regimes r --methods {','.join(methods)} --seeds {seed} --out {out}"
    runs = {method: {str(seed): dict(summary=dict(final_heldout_accuracy=seed / 10))} for method in methods}
    regime = dict(regime=dict(learning_rate=rate), fingerprint="f", runs=runs)
    return dict(environment=environment, command=command, held_back=5, regimes=dict(r=regime), wall_s=10.0)


def test_pieces_of_one_sweep_combine_into_its_results_under_its_whole_command():
    combined = real_cpu.combine([piece(1, "/tmp/s1"), piece(0, "/tmp/s0")], "benchmarks/results/r_0_1")
    assert combined["command"] == (
        "python benchmarks/real_cpu.py --regimes r --methods uniform,one_line --seeds 0,1 --out benchmarks/results/r_0_1"
    )
    assert combined["environment"] == ENVIRONMENT and combined["wall_s"] == 20.0 and combined["pieces"] == 2
    runs = combined["regimes"]["r"]["runs"]
    assert {m: sorted(runs[m]) for m in runs} == {"uniform": ["0", "1"], "one_line": ["0", "1"]}
    assert runs["uniform"]["1"]["summary"]["final_heldout_accuracy"] == 0.1


@pytest.mark.parametrize(
    "other",
    [
        piece(1, "/tmp/s1", methods=("uniform",)),
        piece(1, "/tmp/s1", environment={**ENVIRONMENT, "commit": "0" * 40}),
        piece(1, "/tmp/s1", rate=4e-4),
        piece(0, "/tmp/again"),
    ],
    ids=["other methods", "other commit", "other rate", "a seed twice"],
)
def test_pieces_that_differ_in_more_than_their_seeds_are_refused(other):
    with pytest.raises(SystemExit, match="--combine"):
        real_cpu.combine([piece(0, "/tmp/s0"), other], "out")
