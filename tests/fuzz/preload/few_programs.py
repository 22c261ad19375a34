"""Dask worker preload of tests/fuzz/test_campaign.py: the generator draws one of only three
programs (program i gets the seed i % 3, and the defect position i % 3: a clean program), so
most indices repeat a program drawn before."""
import verimim.fuzz.task as task

task.program_seed = lambda campaign_seed, index: index % 3
task.defect_position = lambda campaign_seed, index, pool_size: index % 3
