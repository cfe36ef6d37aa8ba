"""The sample data set, installed as claimcheck.sample_data package data; the scripts beside it made it."""
