import os
import sys
from pathlib import Path


# Deterministic cuBLAS, so that a resumed run can equal the uninterrupted one; set before CUDA starts.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# The integration tests' builders and oracles (harness.py).
sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
