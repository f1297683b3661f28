"""A BERT sentence encoder (all-MiniLM-L6-v2) in numpy, for comparing meaning models.

The weights are read from a folder holding a sentence-transformers model as the
registry's packages carry it (`config.json`, `model.safetensors`, `tokenizer.json`);
the forward pass is BERT's, followed by mean pooling over the text's tokens and
normalisation to unit length, as the model's own pooling and normalisation modules do.
GELU is computed by its tanh form (a cosine of 0.99999 or closer to the exact form's
output on the texts checked).

Only the benchmark uses it: the model it runs is not part of assern.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MAX_TOKENS = 256  # the model's own `max_seq_length`


def layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    centred = x - x.mean(-1, keepdims=True)
    variance = (centred * centred).mean(-1, keepdims=True)
    return centred / np.sqrt(variance + eps) * weight + bias


def gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


class Layer:
    """One encoder layer's weights, transposed once for `x @ w`."""

    def __init__(self, weights: dict[str, Any], prefix: str) -> None:
        def get(key: str) -> Any:
            return weights[prefix + key]

        attention = "attention.self."
        self.qkv_w = np.concatenate(
            [get(f"{attention}{part}.weight") for part in ("query", "key", "value")]
        ).T.copy()
        self.qkv_b = np.concatenate([get(f"{attention}{part}.bias") for part in ("query", "key", "value")])
        self.out_w = get("attention.output.dense.weight").T.copy()
        self.out_b = get("attention.output.dense.bias")
        self.norm1 = (get("attention.output.LayerNorm.weight"), get("attention.output.LayerNorm.bias"))
        self.up_w = get("intermediate.dense.weight").T.copy()
        self.up_b = get("intermediate.dense.bias")
        self.down_w = get("output.dense.weight").T.copy()
        self.down_b = get("output.dense.bias")
        self.norm2 = (get("output.LayerNorm.weight"), get("output.LayerNorm.bias"))


class Encoder:
    def __init__(self, folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        self.width = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        weights = load_file(str(folder / "model.safetensors"))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.words = weights["embeddings.word_embeddings.weight"]
        # every text is one segment, so its token type is always the first
        segment = weights["embeddings.token_type_embeddings.weight"][0]
        self.positions = weights["embeddings.position_embeddings.weight"] + segment
        self.norm = (weights["embeddings.LayerNorm.weight"], weights["embeddings.LayerNorm.bias"])
        self.layers = [Layer(weights, f"encoder.layer.{i}.") for i in range(int(config["num_hidden_layers"]))]

    def forward(self, ids: Any, mask: Any) -> Any:
        """Unit vectors of a batch: `ids` and `mask` (1 for a token, 0 for padding) are (texts, tokens)."""
        texts, tokens = ids.shape
        size = self.width // self.heads
        x = layer_norm(self.words[ids] + self.positions[:tokens], *self.norm, self.eps)
        padding = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]
        for layer in self.layers:
            qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(texts, tokens, 3, self.heads, size)
            q, k, v = qkv.transpose(2, 0, 3, 1, 4)  # each (texts, heads, tokens, size)
            scores = q @ k.transpose(0, 1, 3, 2) * (1 / math.sqrt(size)) + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(texts, tokens, self.width)
            x = layer_norm(x + context @ layer.out_w + layer.out_b, *layer.norm1, self.eps)
            hidden = gelu(x @ layer.up_w + layer.up_b)
            x = layer_norm(x + hidden @ layer.down_w + layer.down_b, *layer.norm2, self.eps)
        weights = mask[:, :, None]
        pooled = (x * weights).sum(1) / weights.sum(1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed(self, texts: Sequence[str], batch: int = 32) -> Any:
        """One unit row per text; texts of like length batched together (less padding)."""
        encoded = [item.ids for item in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        rows = np.zeros((len(encoded), self.width), dtype=np.float32)
        for start in range(0, len(order), batch):
            chosen = order[start : start + batch]
            longest = max(len(encoded[i]) for i in chosen)
            ids = np.zeros((len(chosen), longest), dtype=np.int64)
            mask = np.zeros((len(chosen), longest), dtype=np.float32)
            for row, i in enumerate(chosen):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1.0
            rows[chosen] = self.forward(ids, mask)
        return rows
