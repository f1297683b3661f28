"""`python -I -m assern.context --root ROOT`: the context server over stdio."""

from assern.context.server import main

if __name__ == "__main__":
    main()
