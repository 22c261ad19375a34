"""verimim.smt"""
