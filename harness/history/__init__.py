"""Runs over time: the store, node identity by serial, drift, baselines, run comparison.

What the layers above use (`__all__`): record (annotate a run with its history, import runs), store, view (the
`harness history` tables), compare (two runs side by side), baseline (capture a profile, handed the
check kinds by its caller), series and identity (for export and fleet).
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["baseline", "compare", "identity", "record", "series", "store", "view"]
