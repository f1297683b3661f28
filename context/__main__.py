"""`python -I -m assern.context --root ROOT`: the context server over stdio."""

import gc

# The SDK's import builds hundreds of pydantic models: with the collector off meanwhile
# the process starts faster (as the instance's own start does, see app/quick.py).
gc.disable()
from assern.context.server import main  # noqa: E402

gc.enable()
gc.freeze()

if __name__ == "__main__":
    main()
