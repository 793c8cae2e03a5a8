"""
KGPS on synthetic prompts whose success rates drift while a policy trains: no model, no trainer, one CPU second.

    python examples/track_drifting_prompts.py --num_prompts 2000 --steps 200

Each step selects a batch, "rolls out" 8 completions per selected prompt from the true success rates, and feeds
the outcomes back. The true rates rise over training, faster for prompts that were trained on. The script prints
the paper's Fig. 1b quantity — the mean absolute error between the predicted success of a batch before its
rollouts and the empirical success after them — and the share of groups that are neither all right nor all wrong.
"""

import argparse

import numpy as np

from trl_kgps import KGPSConfig, KGPSSelector


def main():
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--num_prompts", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    true_logit = rng.normal(-1.0, 2.0, args.num_prompts)
    selector = KGPSSelector(args.num_prompts, KGPSConfig(), seed=args.seed)

    # A first look at every prompt, as the paper's warmup epoch takes (the default needs none: without it, unseen
    # prompts start from what the shared part has learnt).
    k = np.full(args.num_prompts, args.rollouts)
    selector.initialize(np.arange(args.num_prompts), rng.binomial(k, 1 / (1 + np.exp(-true_logit))), k)

    errors, informative = [], []
    for _ in range(args.steps):
        batch = selector.select(args.batch_size)
        predicted = selector.predicted_success(batch)
        s = rng.binomial(args.rollouts, 1 / (1 + np.exp(-true_logit[batch])))
        errors.append(np.abs(predicted - s / args.rollouts).mean())
        informative.append(np.mean((s > 0) & (s < args.rollouts)))
        # The policy update: every prompt drifts a little, the trained ones more.
        step = 0.02 + 0.01 * rng.normal(size=args.num_prompts)
        step[batch] += 0.1
        true_logit += step
        selector.predict(delta_norm=float(np.linalg.norm(step)))
        selector.update(batch, s, np.full(args.batch_size, args.rollouts))

    quarter = args.steps // 4
    print(
        f"MAE predicted vs empirical success: first quarter {np.mean(errors[:quarter]):.3f}, "
        f"last quarter {np.mean(errors[-quarter:]):.3f}"
    )
    print(f"informative groups (0 < s < k): {np.mean(informative):.1%}")
    print(f"true success rate, mean over prompts: {np.mean(1 / (1 + np.exp(-true_logit))):.3f}")


if __name__ == "__main__":
    main()
