"""
The seam with TRL as data: each member of a TRL trainer that KGPS reads, wraps or replaces, with what KGPS relies on.

`trl_private.SEAM` (`GRPOTrainer`, `RLOOTrainer`) and `async_trl_private.USED_MEMBERS` (`AsyncGRPOTrainer`) are the
two tables; each adapter's `check()` verifies its table against the installed TRL when the trainer is built, and
`docs/trl.md` shows both as `markdown()` writes them (a test keeps the page equal to the tables).
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class UsedMember:
    """
    What KGPS relies on in one member of a TRL trainer.

    Attributes:
        path (`str`): `"Class.member"`, or a module-level function's name.
        parameters (`tuple[str, ...]` or `None`): the parameters after `self` it must take (KGPS calls it, or
            replaces it for TRL's calls, with these; `None`: not checked). `trl_private` checks the leading ones (its
            parameters begin with these), `async_trl_private` all of them (its parameters are exactly these).
        coroutine (`bool` or `None`): whether it must be an `async def` (`None`: not checked).
        names (`tuple[str, ...]`): what its code must name: the attributes it sets or reads, the members it calls.
        use (`str`): what KGPS does with it, said in full: the docs' table shows it without `names`.
    """

    path: str
    parameters: tuple[str, ...] | None = None
    coroutine: bool | None = None
    names: tuple[str, ...] = ()
    use: str = ""


def markdown(members: tuple[UsedMember, ...]) -> str:
    """`members` as the Markdown table the docs show: each member (with the parameters checked) and its use."""
    rows = ["| member | what KGPS does with it |", "|---|---|"]
    for member in members:
        signature = "" if member.parameters is None else f"({', '.join(member.parameters)})"
        rows.append(f"| `{member.path}{signature}` | {member.use} |")
    return "\n".join(rows)
