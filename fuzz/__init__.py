"""verimim.fuzz"""
