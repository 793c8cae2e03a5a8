import gc

import numpy as np
import pytest


def pytest_collection_finish(session):
    """
    Moves every object alive once the tests are collected (torch, transformers, TRL and the test modules: most of the
    heap) out of the garbage collector's reach. `Trainer.train()` calls `gc.collect()` through Accelerate's
    `free_memory()`, whose cost grows with everything alive; frozen, the imports are no longer scanned at each of the
    suite's few hundred trainings (the trainer tests run in less than half the time). What the tests create is still
    collected.
    """
    gc.collect()
    gc.freeze()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
