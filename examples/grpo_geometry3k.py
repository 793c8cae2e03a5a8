"""
GRPO of a vision-language model on Geometry3k (the paper's visual geometry task) with KGPS choosing the prompts of
every generation batch. Each problem comes with its diagram; rewards come from math-verify
(`trl.rewards.accuracy_reward`: the last `\\boxed{}` of a completion against the answer). Any dataset laid out as
hiyouga/geometry3k (the default) works: `images` (a list of images), `problem` (with `<image>` markers), `answer`.
The paper's settings: Qwen3-VL-2B-Instruct (also Qwen2.5-VL-7B-Instruct), 8 rollouts per prompt, learning rate
1e-6, completions of up to 1024 tokens.

ARGS="--model_name_or_path Qwen/Qwen3-VL-2B-Instruct --output_dir grpo-geometry3k-Qwen3-VL-2B --selector kgps \
    --dataset_name hiyouga/geometry3k --num_generations 8 --learning_rate 1e-6 --max_completion_length 1024"

# One GPU
python examples/grpo_geometry3k.py $ARGS

# Eight GPUs: DDP, DeepSpeed ZeRO-2, ZeRO-3 or FSDP2
accelerate launch --config_file examples/accelerate_configs/multi_gpu.yaml examples/grpo_geometry3k.py $ARGS
accelerate launch --config_file examples/accelerate_configs/deepspeed_zero2.yaml examples/grpo_geometry3k.py $ARGS
accelerate launch --config_file examples/accelerate_configs/deepspeed_zero3.yaml examples/grpo_geometry3k.py $ARGS
accelerate launch --config_file examples/accelerate_configs/fsdp2.yaml examples/grpo_geometry3k.py $ARGS

# LoRA
python examples/grpo_geometry3k.py $ARGS --use_peft --lora_target_modules q_proj v_proj

# vLLM generation inside the training processes
accelerate launch --config_file examples/accelerate_configs/multi_gpu.yaml examples/grpo_geometry3k.py $ARGS \
    --use_vllm --vllm_mode colocate

# vLLM generation on a server: GPU 0 serves, GPUs 1-7 train
CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen3-VL-2B-Instruct
CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 accelerate launch --config_file examples/accelerate_configs/multi_gpu.yaml \
    --num_processes 7 examples/grpo_geometry3k.py $ARGS --use_vllm --vllm_mode server

# A baseline on the same run: --selector uniform, mopps, greso or dps
"""

import inspect

from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser, get_peft_config, get_quantization_config
from trl.rewards import accuracy_reward

from trl_kgps import KGPSCallback, KGPSConfig, KGPSScriptArguments


INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def make_conversation(example):
    # GRPOTrainer puts the `images` before the text of the first user message, so the `<image>` markers go.
    problem = example["problem"].replace("<image>", "").strip()
    return {
        "prompt": [{"role": "user", "content": f"{problem}\n{INSTRUCTION}"}],
        # math-verify parses a bare `2\sqrt{3}` as 2, and `$2\sqrt{3}$` whole.
        "solution": f"${example['answer']}$",
    }


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

    dataset = load_dataset(script_args.dataset_name, name=script_args.dataset_config)
    dataset = dataset.map(make_conversation, remove_columns=["problem", "answer"])

    trainer = GRPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=accuracy_reward,
        args=training_args,
        train_dataset=dataset[script_args.dataset_train_split],
        eval_dataset=dataset[script_args.dataset_test_split] if training_args.eval_strategy != "no" else None,
        peft_config=get_peft_config(model_args),
        **trainer_kwargs,
        callbacks=[KGPSCallback(kgps_args, selector=script_args.selector)],
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)

    trainer.save_model(training_args.output_dir)
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)


def make_parser() -> TrlParser:
    parser = TrlParser((KGPSScriptArguments, GRPOConfig, KGPSConfig, ModelConfig))
    parser.set_defaults(dataset_name="hiyouga/geometry3k")
    return parser


if __name__ == "__main__":
    script_args, training_args, kgps_args, model_args = make_parser().parse_args_and_config()
    main(script_args, training_args, kgps_args, model_args)
