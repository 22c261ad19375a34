"""verimim: a verification-oriented compiler for GPU programs written in Mim."""

__version__ = "0.1.0"
