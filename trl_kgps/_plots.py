"""Matplotlib for the figures the commands write: headless, and optional (`pip install 'trl-kgps[plots]'`)."""

import logging


logger = logging.getLogger(__name__)


def pyplot():
    """`matplotlib.pyplot` on the non-interactive Agg backend, or None (with a warning) if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no figures (pip install 'trl-kgps[plots]').")
        return None
    return plt
