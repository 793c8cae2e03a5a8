"""The figure helpers of `trl-kgps simulate` and `trl-kgps train`; matplotlib itself comes from `trl_kgps.plots`."""


def moving_average(y, window: int):
    """
    The mean of each point's trailing `window` values (fewer at the start), so that the curve keeps its length and
    its first point: e.g. `[1, 2, 3, 4]` with window 2 gives `[1, 1.5, 2.5, 3.5]`.
    """
    import numpy as np

    y = np.asarray(y, dtype=float)
    window = max(1, min(int(window), y.size))
    total = np.cumsum(np.insert(y, 0, 0.0))
    count = np.minimum(np.arange(1, y.size + 1), window)
    return (total[1:] - total[np.arange(y.size) + 1 - count]) / count


def compact_number(value: float, _position=None) -> str:
    """A tick label that stays short: 950 -> '950', 25000 -> '25k', 1500000 -> '1.5M'."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"
