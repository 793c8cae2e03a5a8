import pytest
from harness import WORDS, build_model, build_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return build_tokenizer(WORDS)


@pytest.fixture
def model(tokenizer):
    return build_model(tokenizer)
