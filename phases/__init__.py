"""verimim.phases"""
