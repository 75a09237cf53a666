"""`python -m generator`: the `orchgen` console script's entry point (signals trapped before the CLI is imported),
for a source tree without the console script on PATH."""
from .entry import main

if __name__ == "__main__":
    main()
