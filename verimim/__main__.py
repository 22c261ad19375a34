"""`python -m verimim …`: the same command line as the `verimim` script."""
from verimim.cli import main

main()
