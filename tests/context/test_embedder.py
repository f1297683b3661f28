"""The extra's model as the context server uses it (context/vectors.py's
`WordLlamaEmbedder`): the same vectors as the model's own `embed`, and no cache of the
texts it tokenized (that cache grew with every chunk ever embedded)."""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

from assern.context.vectors import WordLlamaEmbedder

np = pytest.importorskip("numpy")
wordllama = pytest.importorskip("wordllama")

TEXTS = [
    "src/weather forecast rain\ndef forecast_rain(city):\n    return barometer(city).pressure < 1000",
    "",
    "héllo wörld 日本語 \t tabs\r\n and   runs of   spaces ",
    "   leading spaces",
    "x" * 3000,
    "docs/readme\n# Title\n\nSome *markdown* with `code` and a [link](https://example.org).",
]


def test_the_vectors_are_the_models_own_cut_to_the_dimensions_kept() -> None:
    from wordllama import WordLlama

    embedder = WordLlamaEmbedder(64)
    reference = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True, trunc_dim=64)
    ours = embedder.embed(TEXTS)
    with np.errstate(invalid="ignore"):  # the model divides the empty text's zeros by 0
        theirs = np.nan_to_num(np.asarray(reference.embed(TEXTS, norm=True), dtype=np.float32))
    assert ours.shape == (len(TEXTS), 64)
    assert ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    assert not ours[1].any()  # no token: zeros, not NaN
    np.testing.assert_allclose(np.linalg.norm(ours[[0, 2, 3, 4, 5]], axis=1), 1.0, rtol=1e-6)
    # a batch gives each text the vector it has alone
    np.testing.assert_allclose(embedder.embed([TEXTS[5]])[0], ours[5], atol=1e-6)


def _resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _growth(embedder: WordLlamaEmbedder, seed: int) -> int:
    """How much the process grows while `embedder` embeds 6,000 distinct short texts."""
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "value", "index", "return", "self", "(", ")", ":", "\n    "]
    texts = [" ".join(rng.choice(words) + str(rng.randrange(10**5)) for _ in range(20)) for _ in range(6000)]
    assert all(len(text) < 256 for text in texts)  # the BPE cache keeps no longer word
    embedder.embed(texts[:32])  # the first call's own allocations
    before = _resident_bytes()
    for start in range(32, len(texts), 32):
        embedder.embed(texts[start : start + 32])
    return _resident_bytes() - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_the_tokenizer_keeps_no_cache_of_the_texts_it_saw() -> None:
    """The tokenizer has no pre-tokenizer: each text is one 'word' to its BPE model, whose
    cache (10,000 words by default, each under 256 characters) would keep every distinct
    short chunk it saw. The library cannot tell its cache's size, so its memory is what
    is measured, beside the same model with the cache on again (about 30 MB for these
    6,000 texts; under 2 MB off)."""
    embedder = WordLlamaEmbedder(64)
    assert embedder.tokenizer_cache  # the tokenizer had a cache, and it was switched off
    without = _growth(embedder, seed=1)
    cached = WordLlamaEmbedder(64)
    cached._tokenizer.model._resize_cache(10_000)
    with_cache = _growth(cached, seed=2)
    assert with_cache > 10 * 2**20  # the measure can see a cache
    told = f"grew {without / 2**20:.1f} MB, {with_cache / 2**20:.1f} MB with a cache"
    assert without < with_cache / 4, told
