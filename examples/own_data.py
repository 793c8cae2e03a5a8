"""
GRPO with KGPS on a dataset you write yourself, on a CPU in seconds, nothing downloaded: `python examples/own_data.py`
"""

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from trl_kgps import KGPSCallback
from trl_kgps.demo.train import DEMO_WARM_START
from trl_kgps.tasks import tiny


# Your data: the prompt, the answer your reward checks, and a label that says which prompts are alike.
numbers = [*range(10), *range(10, 100, 9)]  # 10 one-digit and 10 two-digit numbers
pairs = [(a, b) for a in numbers for b in numbers]
dataset = Dataset.from_dict(
    {
        "prompt": [f"{a}+{b}=" for a, b in pairs],
        "answer": [str(a + b) for a, b in pairs],
        "digits": [f"{len(str(a))}+{len(str(b))}" for a, b in pairs],
    }
)


def reward(completions, answer, **kwargs):
    """1.0 where the completion's first word is the answer, else 0.0; TRL passes the `answer` column by name."""
    return [float(completion.split()[:1] == [expected]) for completion, expected in zip(completions, answer)]


# The package's small Qwen2 (one token per character of "0123456789+=") with the warm start it ships.
tokenizer = tiny.build_tokenizer()
model = tiny.build_model(tokenizer)
tiny.load_weights(model, DEMO_WARM_START)

args = GRPOConfig(
    output_dir="own-data-kgps",
    use_cpu=True,
    bf16=False,  # float32 on a CPU (TRL defaults to bf16)
    per_device_train_batch_size=64,  # 8 prompts x 8 completions a step
    max_completion_length=4,
    learning_rate=3e-4,
    max_steps=40,
)
kgps = KGPSCallback()
trainer = GRPOTrainer(
    model=model,
    reward_funcs=reward,
    args=args,
    train_dataset=dataset,
    processing_class=tokenizer,
    callbacks=[kgps],
)
trainer.train()

table = kgps.difficulty_table().to_pandas()  # one row per prompt; `index` is its row in `dataset`
table["digits"] = dataset.select(table["index"])["digits"]  # with any selector, not only KGPS's `group` column
print(table.groupby("digits")[["predicted_success", "times_selected"]].mean().round(2))
