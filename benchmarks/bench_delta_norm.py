"""
The update norm's cost beside one AdamW step of the same model, on whatever device this runs (CUDA when visible).

A Qwen2 built from a config (no download): Qwen2.5-0.5B's shape on a GPU, a 29M-parameter one on a CPU (`--hidden`,
`--layers`, `--vocab` change it), its parameters in `--dtype`, every one trainable. Each step: AdamW (torch's default
implementation for the device) on fixed random gradients, then `ParameterDelta.step()` exact (`sample=1`) and sampled
(`sample=0.01`, the default), each timed alone with the device synchronized, its host sync included. It prints the
medians and their ratios to the AdamW step measured in the same run.

Run: `python benchmarks/bench_delta_norm.py` (`--dtype fp32`, `--steps 10`).
"""

import argparse
import statistics
import time

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from trl_kgps.adapters.distributed import ParameterDelta


DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
# (hidden, intermediate, layers, heads, kv heads, vocab): Qwen2.5-0.5B's shape, and a small one for a CPU.
SHAPES = {"cuda": (896, 4864, 24, 14, 2, 151936), "cpu": (512, 1536, 4, 8, 2, 32000)}


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--vocab", type=int)
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    hidden, intermediate, layers, heads, kv_heads, vocab = SHAPES[device.type]
    hidden, layers, vocab = args.hidden or hidden, args.layers or layers, args.vocab or vocab
    if args.hidden:
        intermediate, heads, kv_heads = 3 * hidden, max(1, hidden // 64), max(1, hidden // 256)
    config = Qwen2Config(
        hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, vocab_size=vocab, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(device=device, dtype=DTYPES[args.dtype])
    parameters = [p for p in model.parameters() if p.requires_grad]
    for p in parameters:
        p.grad = 1e-3 * torch.randn_like(p)
    optimizer = torch.optim.AdamW(parameters, lr=1e-5)
    deltas = {"exact": ParameterDelta(parameters, sample=1.0), "sampled": ParameterDelta(parameters, sample=0.01)}
    for delta in deltas.values():
        delta.reset()
    times = {"adamw": [], "exact": [], "sampled": []}
    for step in range(args.steps + 2):  # the first two warm the allocator and the kernels up
        adamw = timed(optimizer.step, device)
        norms = {name: timed(delta.step, device) for name, delta in deltas.items()}
        if step >= 2:
            times["adamw"].append(adamw)
            for name, seconds in norms.items():
                times[name].append(seconds)
    median = {name: statistics.median(values) for name, values in times.items()}
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    count = sum(p.numel() for p in parameters)
    print(f"{name}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads; medians of {args.steps} steps\n")
    print("| device | dtype | parameters | AdamW step | exact norm | exact / AdamW | sampled norm | sampled / AdamW |")
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {device.type} | {args.dtype} | {count / 1e6:.0f}M | {median['adamw'] * 1e3:.2f} ms | "
        f"{median['exact'] * 1e3:.2f} ms | {median['exact'] / median['adamw']:.2f}x | "
        f"{median['sampled'] * 1e3:.2f} ms | {median['sampled'] / median['adamw']:.3f}x |"
    )


if __name__ == "__main__":
    main()
