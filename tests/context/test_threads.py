"""The context process keeps BLAS and the tokenizer to one thread each (context/__main__.py):
their thread pools, spinning on a loaded machine, made a question's nearest-chunk search
tens of times slower. A value the user gives wins."""

from __future__ import annotations

import os
import subprocess
import sys

SHOW = (
    "import os, assern.context.__main__; "
    "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['TOKENIZERS_PARALLELISM'])"
)


def _shown(**env: str) -> str:
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM")
    }
    done = subprocess.run(
        [sys.executable, "-c", SHOW],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_one_thread_each_unless_the_user_says_otherwise() -> None:
    assert _shown() == "1 false"
    assert _shown(OPENBLAS_NUM_THREADS="2", TOKENIZERS_PARALLELISM="true") == "2 true"
