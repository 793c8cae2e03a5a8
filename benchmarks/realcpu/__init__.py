"""
The real CPU testbed behind `benchmarks/real_cpu.py`, one concern per module:

- `setting`: the regimes (pool, batch shape, group size, learning rate), the committed warm start, the GRPO
  arguments the benchmark pins, and the data of each regime;
- `methods`: every method's selector by name, the benchmark-only ones included (the oracles, DAPO's dynamic
  sampling);
- `runner`: one run (regime, method, seed) with the real `GRPOTrainer`, its snapshots, and a sweep over worker
  processes;
- `report`: the per-run curves and summary, the comparison paired by seed, the tables and the plots;
- `calibration`: each selector's belief as intervals, and how well it knows the truth (ECE, interval coverage);
- `environment`: what a result was measured with (packages, Python, CPU, threads, commit);
- `check`: whether this environment reproduces the committed results.
"""
