"""
Asynchronous GRPO on MATH with TRL's `AsyncGRPOTrainer` (TRL 1.16, `trl.experimental.async_grpo`) and KGPS choosing
the prompts. A vLLM server generates while the trainer trains: the trainer's rollout worker streams completions from
it, scores them with math-verify (`trl.rewards.accuracy_reward`) and queues them, and the trainer sends the server its
new weights over NCCL every `--weight_sync_steps` steps. KGPS adds one line, `callbacks=[KGPSCallback(...)]`: the
worker then reads the prompts KGPS chooses instead of the dataset in order, and KGPS learns from every group it scores.
KGPS refuses a TRL other than 1.16.0, whose private rollout loop it was checked on.

ARGS="--model_name_or_path Qwen/Qwen3-0.6B --output_dir async-grpo-math-Qwen3-0.6B --selector kgps \
    --dataset_name DigitalLearningGmbH/MATH-lighteval --num_generations 8 --learning_rate 1e-6 \
    --max_completion_length 4096 --max_steps 1000 --max_staleness 4"

# GPU 0 serves (`trl vllm-serve` starts `vllm serve` with the weight-transfer and log-probability settings the
# trainer needs); GPUs 1-7 train, with FSDP2 (AsyncGRPOTrainer's parallelism)
CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-0.6B
CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 accelerate launch --config_file examples/accelerate_configs/fsdp2.yaml \
    --num_processes 7 examples/async_grpo_math.py $ARGS

# Two GPUs: one serves, one trains
CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-0.6B
CUDA_VISIBLE_DEVICES=1 python examples/async_grpo_math.py $ARGS

# A baseline on the same run: --selector uniform, mopps, greso or dps
"""

from dataclasses import dataclass, field

from datasets import load_dataset
from trl import TrlParser
from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
from trl.rewards import accuracy_reward

from trl_kgps import KGPSCallback, KGPSConfig, KGPSScriptArguments


@dataclass
class ModelArguments:
    """The policy to train (`AsyncGRPOConfig` has its own `dtype`, which TRL's `ModelConfig` would duplicate)."""

    model_name_or_path: str = field(default="Qwen/Qwen3-0.6B", metadata={"help": "A Hub model id or a local path."})
    model_revision: str = field(default="main", metadata={"help": "The model's branch, tag or commit."})


INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def make_conversation(example):
    return {"prompt": [{"role": "user", "content": f"{example['problem']}\n{INSTRUCTION}"}]}


def main(script_args, training_args, kgps_args, model_args):
    training_args.model_init_kwargs = {
        "revision": model_args.model_revision,
        **(training_args.model_init_kwargs or {}),
    }
    # `solution` stays: accuracy_reward receives it and parses its last \boxed{}.
    dataset = load_dataset(script_args.dataset_name, name=script_args.dataset_config)
    dataset = dataset.map(make_conversation, remove_columns=["problem"])

    trainer = AsyncGRPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=accuracy_reward,
        args=training_args,
        train_dataset=dataset[script_args.dataset_train_split],
        callbacks=[KGPSCallback(kgps_args, selector=script_args.selector)],
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    trainer.save_model(training_args.output_dir)
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)


def make_parser() -> TrlParser:
    parser = TrlParser((KGPSScriptArguments, AsyncGRPOConfig, KGPSConfig, ModelArguments))
    # MATH's difficulty level (1-5) and subject (7 types): KGPS learns across the prompts that share them.
    parser.set_defaults(dataset_name="DigitalLearningGmbH/MATH-lighteval", feature_columns=["level", "type"])
    return parser


if __name__ == "__main__":
    script_args, training_args, kgps_args, model_args = make_parser().parse_args_and_config()
    main(script_args, training_args, kgps_args, model_args)
