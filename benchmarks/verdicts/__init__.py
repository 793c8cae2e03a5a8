"""
The verdicts on the committed benchmark runs, one module each, written by `benchmarks/verdict.py <name>`:

- `one_line`: the one line, `KGPSCallback()`, against its peers and its goals, seeds 0-9;
- `rollouts`: the one line against DAPO's dynamic sampling, per step and per rollout;
- `calibration`: how well each selector knows the success rates it chooses by, and ARCUS as a peer;
- `datasets`: copies of a prompt and a prior column, as users bring them;
- `practice`: the one line against what practitioners do.

Each module names the roles it reads (`ROLES`) and renders its markdown and figures from their runs (`render`); the
files each role reads, in order of precedence, are data: `benchmarks/results/INDEX.json`, `verdicts`.
"""
