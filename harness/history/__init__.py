"""Runs over time: the store, node identity by serial, drift, baselines, run comparison."""
