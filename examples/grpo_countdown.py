"""
GRPO on Countdown (CD-34, the paper's planning task) with KGPS choosing the prompts of every generation batch. The
puzzles are generated here (`trl_kgps.tasks.countdown`): reach a target from 3 or 4 numbers with + - * /. Nothing
is downloaded but the model. The paper's settings: 8 rollouts per prompt, learning rate 1e-6, completions of up to
1024 tokens.

ARGS="--model_name_or_path Qwen/Qwen3-0.6B --output_dir grpo-countdown-Qwen3-0.6B --selector kgps \
    --num_generations 8 --learning_rate 1e-6 --max_completion_length 1024"

# One GPU
python examples/grpo_countdown.py $ARGS

# Eight GPUs: DDP, DeepSpeed ZeRO-2, ZeRO-3 or FSDP2
accelerate launch --config_file examples/accelerate_configs/multi_gpu.yaml examples/grpo_countdown.py $ARGS
accelerate launch --config_file examples/accelerate_configs/deepspeed_zero2.yaml examples/grpo_countdown.py $ARGS
accelerate launch --config_file examples/accelerate_configs/deepspeed_zero3.yaml examples/grpo_countdown.py $ARGS
accelerate launch --config_file examples/accelerate_configs/fsdp2.yaml examples/grpo_countdown.py $ARGS

# LoRA
python examples/grpo_countdown.py $ARGS --use_peft --lora_target_modules q_proj v_proj

# vLLM generation inside the training processes
accelerate launch --config_file examples/accelerate_configs/multi_gpu.yaml examples/grpo_countdown.py $ARGS \
    --use_vllm --vllm_mode colocate

# vLLM generation on a server: GPU 0 serves, GPUs 1-7 train
CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-0.6B
CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 accelerate launch --config_file examples/accelerate_configs/multi_gpu.yaml \
    --num_processes 7 examples/grpo_countdown.py $ARGS --use_vllm --vllm_mode server

# A baseline on the same run: --selector uniform, mopps, greso or dps
"""

import inspect
from dataclasses import dataclass, field

from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser, get_peft_config, get_quantization_config

from trl_kgps import KGPSCallback, KGPSConfig, KGPSScriptArguments
from trl_kgps.tasks.countdown import countdown_reward, make_dataset


@dataclass
class CountdownScriptArguments(KGPSScriptArguments):
    """
    [`KGPSScriptArguments`] plus the size of the generated data; `dataset_name` and its siblings are not used.

    Args:
        num_train_problems (`int`, *optional*, defaults to `10000`):
            Number of training puzzles.
        num_test_problems (`int`, *optional*, defaults to `500`):
            Number of held-out puzzles, evaluated when `eval_strategy` is not `"no"`.
    """

    num_train_problems: int = field(default=10000, metadata={"help": "Number of training puzzles."})
    num_test_problems: int = field(
        default=500,
        metadata={"help": "Number of held-out puzzles, evaluated when `eval_strategy` is not 'no'."},
    )


def main(script_args, training_args, kgps_args, model_args):
    model_init_kwargs = dict(
        revision=model_args.model_revision, attn_implementation=model_args.attn_implementation, dtype=model_args.dtype
    )
    # TRL 1.8 added GRPOTrainer(quantization_config=...); before it, the model is loaded with it.
    quantization_config, trainer_kwargs = get_quantization_config(model_args), {}
    if "quantization_config" in inspect.signature(GRPOTrainer).parameters:
        trainer_kwargs["quantization_config"] = quantization_config
    elif quantization_config is not None:
        from trl import get_kbit_device_map

        model_init_kwargs.update(quantization_config=quantization_config, device_map=get_kbit_device_map())
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = model_init_kwargs

    # One draw of distinct puzzles, split so that no test puzzle is also a training puzzle. The draw is seeded apart
    # from `--seed`: every run, and every rank (KGPS selects by index), gets the same puzzles.
    dataset = make_dataset(script_args.num_train_problems + script_args.num_test_problems, seed=0)
    dataset = dataset.train_test_split(test_size=script_args.num_test_problems, shuffle=False)

    trainer = GRPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=countdown_reward,
        args=training_args,
        train_dataset=dataset["train"],
        eval_dataset=dataset["test"] if training_args.eval_strategy != "no" else None,
        peft_config=get_peft_config(model_args),
        **trainer_kwargs,
        callbacks=[KGPSCallback(kgps_args, selector=script_args.selector)],
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    trainer.save_model(training_args.output_dir)
    if training_args.push_to_hub:
        trainer.push_to_hub()


def make_parser() -> TrlParser:
    return TrlParser((CountdownScriptArguments, GRPOConfig, KGPSConfig, ModelConfig))


if __name__ == "__main__":
    script_args, training_args, kgps_args, model_args = make_parser().parse_args_and_config()
    main(script_args, training_args, kgps_args, model_args)
