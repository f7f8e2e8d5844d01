"""Runs over time: the store, node identity by serial, drift, baselines, run comparison.

What the layers above use: record (annotate a run with its history, import runs), store, view (the
`harness history` tables), compare (two runs side by side), baseline (capture a profile, handed the
check kinds by its caller), series and identity (for export and fleet).
"""
