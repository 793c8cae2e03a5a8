"""
What the example scripts need to run here, offline, in seconds: tiny models saved like Hub checkpoints (a 2-layer
Qwen2 and a LLaVA over it, each with a tokenizer and a chat template made here), datasets shaped like the Hub's
written to disk, and a runner that launches a script as a real subprocess.
"""

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from trl_kgps.tasks import tiny


ROOT = Path(__file__).resolve().parents[2]

WORDS = ["system:", "user:", "assistant:", "<answer>", "</answer>", "+", "-", "*", "/", "(", ")", *"0123456789"]
# Renders plain and structured (text and image parts) messages, as TRL passes both to the template.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %} "
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)

# Arguments for a 2-step CPU run; each test adds the script's own.
SMOKE_ARGS = [
    "--max_steps", "2",
    "--use_cpu", "true",
    "--bf16", "false",
    "--report_to", "none",
    "--per_device_train_batch_size", "4",
    "--num_generations", "2",
    "--max_completion_length", "8",
    "--logging_steps", "1",
    "--save_steps", "2",
    "--seed", "0",
    "--disable_tqdm", "true",
]  # fmt: skip


def _tokenizer():
    return tiny.build_tokenizer(
        WORDS, split="whitespace", special_tokens=["<image>"], chat_template=CHAT_TEMPLATE, padding_side="right"
    )


def _text_config(tokenizer):
    return tiny.qwen2_config(tokenizer, hidden_size=16, num_heads=2, num_kv_heads=1, max_length=256)


@pytest.fixture(scope="session")
def language_model(tmp_path_factory):
    """A directory holding a tiny Qwen2 causal LM and its tokenizer, as `--model_name_or_path` expects."""
    import torch
    from transformers import Qwen2ForCausalLM

    path = tmp_path_factory.mktemp("tiny-qwen2")
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    Qwen2ForCausalLM(_text_config(tokenizer)).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def vision_language_model(tmp_path_factory):
    """
    A directory holding a tiny LLaVA (a 1-layer CLIP vision tower on the tiny Qwen2) and its processor. Qwen-VL's
    processors need torchvision, which the project does not install; GRPOTrainer treats every VLM alike.
    """
    import torch
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    try:
        from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
    except ImportError:  # transformers 4: the PIL-based processor is the slow one
        from transformers import CLIPImageProcessor as CLIPImageProcessorPil

    path = tmp_path_factory.mktemp("tiny-llava")
    tokenizer = _tokenizer()
    vision = CLIPVisionConfig(
        image_size=28, patch_size=14, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=_text_config(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(path)
    # Every image becomes 28x28 pixels: (28 / 14)^2 = 4 image tokens.
    LlavaProcessor(
        image_processor=CLIPImageProcessorPil(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}),
        tokenizer=tokenizer,
        patch_size=14,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    ).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def math_dataset(tmp_path_factory):
    """A directory of `train.jsonl` and `test.jsonl` laid out as MATH-lighteval (`problem`, `solution`, ...)."""
    from datasets import Dataset

    path = tmp_path_factory.mktemp("math")
    for split, size in (("train", 8), ("test", 2)):
        rows = [
            {
                "problem": f"What is ${a} + {a + 1}$?",
                "solution": f"${a} + {a + 1} = \\boxed{{{2 * a + 1}}}$.",
                "level": "Level 1",
                "type": "Prealgebra",
            }
            for a in range(size)
        ]
        Dataset.from_list(rows).to_json(path / f"{split}.jsonl")
    return path


@pytest.fixture(scope="session")
def geometry_dataset(tmp_path_factory):
    """A directory of `train.parquet` and `test.parquet` laid out as hiyouga/geometry3k (`images`, `problem`, ...)."""
    from datasets import Dataset, Features, Image, Value

    try:
        from datasets import List
    except ImportError:  # datasets < 4
        from datasets import Sequence as List
    from PIL import Image as PILImage

    path = tmp_path_factory.mktemp("geometry3k")
    features = Features({"images": List(Image()), "problem": Value("string"), "answer": Value("string")})
    for split, size in (("train", 8), ("test", 2)):
        columns = {
            "images": [[PILImage.new("RGB", (40 + 8 * i, 32), (30 * i, 0, 0))] for i in range(size)],
            "problem": [f"<image>Find x if the side is {i}." for i in range(size)],
            "answer": [f"{i}\\sqrt{{3}}" for i in range(1, size + 1)],
        }
        Dataset.from_dict(columns, features=features).to_parquet(path / f"{split}.parquet")
    return path


def offline_env(tmp_path):
    """The environment an example runs in: offline, one thread, its own datasets cache under `tmp_path`."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(tmp_path / "datasets-cache"),
    }


@pytest.fixture
def run_example(tmp_path):
    """Runs `examples/<script>` in a subprocess for two CPU steps, offline; returns its `output_dir`."""

    def run(script, *args):
        output_dir = tmp_path / "output"
        env = offline_env(tmp_path)
        command = [sys.executable, str(ROOT / "examples" / script), *SMOKE_ARGS, "--output_dir", str(output_dir)]
        result = subprocess.run(
            [*command, *map(str, args)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"{script} failed:\n{result.stdout[-2000:]}\n{result.stderr[-6000:]}"
        return output_dir

    return run


@pytest.fixture
def run_example_as_is(tmp_path):
    """
    Runs `examples/<script>` (or `script`, an absolute path: an example edited by a test) in a subprocess with no
    arguments, offline, in `tmp_path`; returns the finished run.
    """

    def run(script):
        result = subprocess.run(
            [sys.executable, str(ROOT / "examples" / script)],
            cwd=tmp_path,
            env=offline_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, f"{script} failed:\n{result.stdout[-2000:]}\n{result.stderr[-6000:]}"
        return result

    return run


@pytest.fixture(scope="session")
def load_example():
    """The namespace of `examples/<script>` imported without running it: `make_parser`, `main`, ..."""
    return lambda script: runpy.run_path(str(ROOT / "examples" / script))
