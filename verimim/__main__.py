"""`python -m verimim …`: the same command line as the `verimim` script."""
from verimim.cli import main

if __name__ == "__main__":  # (importing the module, as a walk over the package does, runs nothing)
    main()
