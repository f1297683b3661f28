"""`python -I -m assern.context --root ROOT`: the context server over stdio."""

import gc
import os

# One thread for BLAS (numpy's matrix product) and for the semantic extra's tokenizer:
# the server's work already runs in worker threads of its own, and their thread pools,
# spinning while they wait for a core, made the nearest-chunk search of a question take
# 136 ms (p50) instead of 3 ms on a loaded 2-core machine, for no gain in embedding speed.
# Set before numpy is imported (OpenBLAS reads it as it loads); a value given wins.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The SDK's import builds hundreds of pydantic models: with the collector off meanwhile
# the process starts faster (as the instance's own start does, see app/quick.py).
gc.disable()
from assern.context.server import main  # noqa: E402

gc.enable()
gc.freeze()

if __name__ == "__main__":
    main()
