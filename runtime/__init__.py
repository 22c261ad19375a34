"""verimim.runtime"""
