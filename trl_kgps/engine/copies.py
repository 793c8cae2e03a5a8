"""
Which rows of a train dataset hold the same prompt, numpy only. KGPS keeps one belief per prompt, not per row: a
dataset that repeats its prompts (DAPO-Math-17k holds each of its ~17,000 prompts about 100 times) would otherwise
split each prompt's evidence among its copies, put two copies in one batch and count copies as coverage. The selector
and the ledger number the distinct prompts `0 .. P - 1`; the sampler yields rows, each prompt's rows in turn, and the
adapters map the rows scored back to prompts.
"""

import numpy as np


class PromptCopies:
    """
    The map between the `N` rows of a train dataset and its `P <= N` distinct prompts, numbered in the order of their
    first row. A prompt chosen for the `t`-th time (`t = 0, 1, ...`) trains on its row `t mod rows_per_prompt`, in
    the dataset's order: over a run every copy reaches the trainer, whatever columns it differs in.

    Args:
        prompt_of_row (`np.ndarray` of shape `(N,)`, integer): each row's prompt, numbered by first appearance
            (`[0, 1, 0, 2]`: rows 0 and 2 hold prompt 0).
        key (`str` or `None`, *optional*): the column whose equal values made rows copies; `None`: every row is its
            own prompt.
        columns (`tuple[str, ...]`, *optional*): the other columns whose values copies share (the columns the rewards
            and the environments read).

    Attributes:
        prompt_of_row (`np.ndarray` of shape `(N,)`, int64): as passed.
        first_row (`np.ndarray` of shape `(P,)`, int64): each prompt's first row.
        rows_per_prompt (`np.ndarray` of shape `(P,)`, int64): how many rows hold each prompt.

    Example:

    ```python
    >>> copies = PromptCopies(np.array([0, 1, 0, 2]), key="prompt")
    >>> copies.num_prompts, copies.copies, copies.first_row.tolist()
    (3, 1, [0, 1, 3])
    >>> copies.prompts([2, 3]).tolist(), copies.rows([0, 2]).tolist(), copies.rows([0, 2], turns=[1, 1]).tolist()
    ([0, 2], [0, 3], [2, 3])
    ```
    """

    def __init__(self, prompt_of_row: np.ndarray, key: str | None = None, columns: tuple[str, ...] = ()):
        prompt_of_row = np.asarray(prompt_of_row, dtype=np.int64)
        num_prompts = int(prompt_of_row.max()) + 1 if prompt_of_row.size else 0
        rows = np.arange(prompt_of_row.size, dtype=np.int64)
        first_row = np.full(num_prompts, prompt_of_row.size, dtype=np.int64)
        np.minimum.at(first_row, prompt_of_row, rows)
        if (
            prompt_of_row.ndim != 1
            or (prompt_of_row.size and prompt_of_row.min() < 0)
            or (np.diff(first_row) <= 0).any()
        ):
            raise ValueError("prompt_of_row must number the prompts 0, 1, ... in the order of their first row")
        self.prompt_of_row = prompt_of_row
        self.first_row = first_row
        self.rows_per_prompt = np.bincount(prompt_of_row, minlength=num_prompts).astype(np.int64)
        self.key = key
        self.columns = tuple(columns)
        # Each prompt's rows, in order: `_rows[_start[p] : _start[p] + rows_per_prompt[p]]`.
        self._rows = np.argsort(prompt_of_row, kind="stable")
        self._start = np.concatenate([[0], np.cumsum(self.rows_per_prompt)[:-1]]).astype(np.int64)

    @classmethod
    def by_row(cls, num_rows: int) -> "PromptCopies":
        """Every row its own prompt (a dataset without copies, or `KGPSConfig(prompt_key=None)`)."""
        return cls(np.arange(num_rows, dtype=np.int64), key=None)

    @property
    def num_rows(self) -> int:
        """`N`, the dataset's rows."""
        return self.prompt_of_row.size

    @property
    def num_prompts(self) -> int:
        """`P`, its distinct prompts, which the selector tracks."""
        return self.first_row.size

    @property
    def copies(self) -> int:
        """`N - P`: rows that repeat a prompt of an earlier row."""
        return self.num_rows - self.num_prompts

    def rows(self, prompts: np.ndarray, turns: np.ndarray | None = None) -> np.ndarray:
        """
        The rows `(B,)` the sampler yields for `prompts` (`(B,)`): each prompt's row `turns mod rows_per_prompt`
        (`turns` `(B,)`, how many times each prompt was chosen before), its first row where `turns` is unset.
        """
        prompts = np.asarray(prompts, dtype=np.int64)
        if turns is None:
            return self.first_row[prompts]
        return self._rows[self._start[prompts] + np.asarray(turns, dtype=np.int64) % self.rows_per_prompt[prompts]]

    def prompts(self, rows: np.ndarray) -> np.ndarray:
        """The prompts `(B,)` that `rows` (`(B,)`, dataset indices) hold."""
        return self.prompt_of_row[np.asarray(rows, dtype=np.int64)]

    @property
    def identity(self) -> str:
        """What made rows copies, for the log: ``"'prompt' and 'answer'"``."""
        return " and ".join(repr(name) for name in (self.key, *self.columns))

    def describe(self, weigh_by_rows: bool = False) -> str:
        """One line for the log: how many rows are copies, of what, how they weigh in selection (`weigh_by_rows`:
        `KGPSConfig(copies_weight="rows")`) and how they train."""
        if not self.copies:
            return f"{self.num_prompts:,} prompts, no copies"
        weigh = (
            "weighs each prompt by its rows in selection"
            if weigh_by_rows
            else "weighs each prompt once in selection whatever its rows (KGPSConfig(copies_weight='rows') weighs by "
            "rows)"
        )
        return (
            f"{self.num_rows:,} rows hold {self.num_prompts:,} distinct prompts (rows with equal {self.identity}; "
            f"{self.copies:,} rows repeat an earlier row's): KGPS keeps one belief per prompt, {weigh}, and trains "
            "on a prompt's rows in turn, each time it is chosen"
        )
