"""The numpy sentence encoder of ops/bench/search/minilm.py (the `minilm` model of
models.py) computes what BERT with mean pooling computes: checked on a small random
model against a plain implementation, one text and one attention head at a time."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ops_scripts import OPS, load_script
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, pre_tokenizers, processors

minilm: Any = load_script(OPS / "bench" / "search" / "minilm.py", "search_minilm")

WIDTH, HEADS, LAYERS, INNER = 8, 2, 2, 16
WORDS = ["[UNK]", "[CLS]", "[SEP]", "how", "far", "is", "it", "rotate", "the", "page", "to", "landscape"]


def write_model(folder: Path) -> dict[str, Any]:
    rng = np.random.default_rng(7)

    def rand(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": rand(len(WORDS), WIDTH),
        "embeddings.position_embeddings.weight": rand(32, WIDTH),
        "embeddings.token_type_embeddings.weight": rand(2, WIDTH),
        "embeddings.LayerNorm.weight": 1 + rand(WIDTH),
        "embeddings.LayerNorm.bias": rand(WIDTH),
    }
    dense = {f"attention.self.{part}": (WIDTH, WIDTH) for part in ("query", "key", "value")}
    dense |= {"attention.output.dense": (WIDTH, WIDTH), "intermediate.dense": (INNER, WIDTH)}
    dense |= {"output.dense": (WIDTH, INNER)}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for part, (rows, cols) in dense.items():
            weights[f"{p}{part}.weight"] = rand(rows, cols)
            weights[f"{p}{part}.bias"] = rand(rows)
        for part in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[f"{p}{part}.weight"] = 1 + rand(WIDTH)
            weights[f"{p}{part}.bias"] = rand(WIDTH)
    save_file(weights, str(folder / "model.safetensors"))
    config = {
        "hidden_size": WIDTH,
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "layer_norm_eps": 1e-12,
    }
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    tokenizer.save(str(folder / "tokenizer.json"))
    return weights


def plain(weights: dict[str, Any], ids: list[int]) -> Any:
    """BERT for one text, written out: each head's attention on its own."""

    def norm(x: Any, key: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        std = np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-12)
        return (x - mean) / std * weights[key + ".weight"] + weights[key + ".bias"]

    def dense(x: Any, key: str) -> Any:
        return x @ weights[key + ".weight"].T + weights[key + ".bias"]

    n = len(ids)
    x = weights["embeddings.word_embeddings.weight"][ids]
    x = (
        x
        + weights["embeddings.position_embeddings.weight"][:n]
        + weights["embeddings.token_type_embeddings.weight"][0]
    )
    x = norm(x, "embeddings.LayerNorm")
    size = WIDTH // HEADS
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        q, k, v = (dense(x, f"{p}attention.self.{part}") for part in ("query", "key", "value"))
        heads = []
        for h in range(HEADS):
            cols = slice(h * size, (h + 1) * size)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(size)
            probs = np.exp(scores - scores.max(1, keepdims=True))
            probs /= probs.sum(1, keepdims=True)
            heads.append(probs @ v[:, cols])
        x = norm(
            x + dense(np.concatenate(heads, 1), f"{p}attention.output.dense"),
            f"{p}attention.output.LayerNorm",
        )
        inner = dense(x, f"{p}intermediate.dense")
        inner = 0.5 * inner * (1 + np.tanh(math.sqrt(2 / math.pi) * (inner + 0.044715 * inner**3)))
        x = norm(x + dense(inner, f"{p}output.dense"), f"{p}output.LayerNorm")
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


@pytest.fixture
def model(tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    weights = write_model(tmp_path)
    return minilm.Encoder(tmp_path), weights


def test_each_text_is_embedded_as_bert_with_mean_pooling_embeds_it(model: tuple[Any, dict[str, Any]]) -> None:
    encoder, weights = model
    texts = ["rotate the page to landscape", "how far", "how far is it", "far"]
    rows = encoder.embed(texts, batch=4)  # texts of four lengths, padded in one batch
    assert rows.shape == (4, WIDTH)
    for text, row in zip(texts, rows, strict=True):
        ids = encoder.tokenizer.encode(text).ids
        assert ids[0] == 1
        assert ids[-1] == 2
        np.testing.assert_allclose(row, plain(weights, ids), atol=1e-5)
        assert abs(float(np.linalg.norm(row)) - 1.0) < 1e-5


def test_padding_and_batching_do_not_change_a_text_s_vector(model: tuple[Any, dict[str, Any]]) -> None:
    encoder, _weights = model
    texts = ["how far is it", "far", "rotate the page to landscape", "the page"]
    alone = np.vstack([encoder.embed([text]) for text in texts])
    for batch in (1, 2, 3, 4):
        np.testing.assert_allclose(encoder.embed(texts, batch=batch), alone, atol=1e-5)
