"""
The error of the default, sampled parameter-update norm (`delta_norm_sample=0.01`) against the exact one, on real
AdamW updates on two CPU processes under DDP and FSDP2: `tests/distributed/sampled_delta_norm.py` at two model
sizes, many steps and offset seeds; prints the ratio's mean, spread and worst case.

Run: `python benchmarks/delta_norm_sample_error.py` (about 6 minutes on 2 CPU cores).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "distributed" / "sampled_delta_norm.py"
# (hidden size, layers, vocabulary): the distributed test's 0.5M model, a 4.2M and a 29M one
SIZES = [(128, 2, 1024), (256, 4, 4096), (512, 8, 8192)]


def run(hidden: int, layers: int, vocab: int, steps: int, seeds: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        command += [str(SCRIPT), os.path.join(out, "out.json"), "--hidden", str(hidden), "--layers", str(layers)]
        command += ["--vocab", str(vocab), "--steps", str(steps), "--seeds", str(seeds)]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        subprocess.run(command, check=True, env=env, capture_output=True)
        return json.loads(Path(out, "out.0.json").read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--json", help="also write every ratio to this file")
    args = parser.parse_args()
    print(f"sampled / exact norm after each of {args.steps} AdamW steps (lr 1e-5), {args.seeds} offset seeds:\n")
    print("| parameters | backend | values tracked per rank | mean | std | worst |")
    print("|---|---|---|---|---|---|")
    results = []
    for hidden, layers, vocab in SIZES:
        result = run(hidden, layers, vocab, args.steps, args.seeds)
        for backend in ("ddp", "fsdp2"):
            record = result[backend]
            ratios = np.array(record["sampled"]) / np.array(record["exact"])[:, None]  # (steps, seeds)
            worst = ratios.flat[np.abs(ratios - 1).argmax()]
            print(
                f"| {result['params'] / 1e6:.2f}M | {backend.upper()} | {record['tracked_values']} "
                f"({record['tracked_values'] / record['local_values']:.4%}) | {ratios.mean():.4f} | "
                f"{ratios.std():.4f} | {worst:.4f} |"
            )
            results.append({"params": result["params"], "backend": backend, **record, "ratios": ratios.tolist()})
    if args.json:
        Path(args.json).write_text(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
