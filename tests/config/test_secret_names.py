"""The two secret-name rules agree in the safe direction: whatever output masking hides stays off argv too."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from console.masking import is_secret_name
from console.sglang.command import is_secret_env

WORDS = [
    "HF",
    "TOKEN",
    "KEY",
    "API",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "AWS",
    "ACCESS",
    "MAX",
    "NUM",
    "TOKENS",
    "TOKENIZERS",
    "PARALLELISM",
    "PATH",
    "CUDA",
    "VISIBLE",
    "DEVICES",
    "GITHUB",
    "APIKEY",
    "x",
    "y",
]


@settings(max_examples=500, derandomize=True)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), st.sampled_from(["_", "", "-"]))
def test_masked_names_never_reach_argv(words: list[str], sep: str) -> None:
    name = sep.join(words)
    if is_secret_name(name):
        assert is_secret_env(name), name


def test_known_names() -> None:
    for n in ("HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "GITHUBTOKEN"):
        assert is_secret_name(n) and is_secret_env(n), n
    assert not is_secret_env("CUDA_VISIBLE_DEVICES") and not is_secret_name("max_total_num_tokens")
