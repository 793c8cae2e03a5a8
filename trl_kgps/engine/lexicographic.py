"""
Rows of codes sorted lexicographically without sorting rows: each row read as one integer, which sorts as the rows do.
`np.lexsort` and `np.unique(axis=0)` compare rows column by column and take about a second for a million rows; one
integer per row sorts in tens of milliseconds. The design's groups (`selectors.shared_factor`) and the rows digest's
order-free form (`engine.prompts_digest`) are both read this way.
"""

import numpy as np


def row_keys(codes: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """
    `(N,)` int64: one key per row of the table whose column `j` is `codes[j]`, `(N,)` ints in `[0, sizes[j])`. Keys
    compare as the rows do, lexicographically (column 0 first): equal rows have equal keys, and a row before another
    has the smaller key.

    A row's key is its codes read as the digits of a number in mixed radix; where the next digit would take the
    number past int64, the keys so far are replaced by their ranks (at most `N` values), which keeps their order.
    """
    key, size = np.asarray(codes[0], dtype=np.int64), int(sizes[0])
    for code, n in zip(codes[1:], sizes[1:]):
        if size * n >= 2**63:
            distinct, key = np.unique(key, return_inverse=True)
            key, size = key.reshape(-1), len(distinct)
        # key <- key * n + code: (size - 1) * n + n - 1 < size * n, within int64
        key, size = key * n + code, size * n
    return key
