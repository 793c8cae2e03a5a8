"""The model card's words: its count of rounds and its quick start for a model without a chat template."""

from trl_kgps._report import _plain_text_quick_start, _rounds_line


def test_the_rounds_line_explains_the_batch_chosen_ahead_and_the_warmup():
    assert _rounds_line(301, 300, 0) == (
        "- rounds: 300 generation batches rolled out and trained on, all chosen by the selector; 1 more chosen but "
        "never rolled out (the trainer asks for the next batch while the current one trains, and training stopped "
        "first)"
    )
    assert (
        _rounds_line(8, 8, 4)
        == "- rounds: 8 generation batches rolled out and trained on, the first 4 of them in the uniform warmup"
    )
    assert _rounds_line(3, 2, 4).startswith("- rounds: 2 generation batches rolled out and trained on, the first 2 of")


TRL_CARD = """# Model Card for out

## Quick start

```python
from transformers import pipeline

question = "If you had a time machine?"
generator = pipeline("text-generation", model="someone/out", device_map="auto")
output = generator([{"role": "user", "content": question}], max_new_tokens=128, return_full_text=False)[0]
print(output["generated_text"])
```

## Training procedure
"""


def test_the_quick_start_of_a_model_without_chat_template_continues_plain_text():
    card = _plain_text_quick_start(TRL_CARD, '3+"5=', 4)
    head, code, tail = card.split("```")[0], card.split("```")[1], card.split("```")[2]
    assert head == TRL_CARD.split("```")[0] and tail == "\n\n## Training procedure\n"
    assert 'model="someone/out"' in code and "role" not in code
    assert 'output = generator("3+\\"5=", max_new_tokens=4, return_full_text=False)[0]' in code
    compile(code.removeprefix("python\n"), "quick start", "exec")
    assert _plain_text_quick_start("# A card with no quick start\n", "1+1=", 4) == "# A card with no quick start\n"
