"""Tables of metric values for pandas, spreadsheets and data warehouses (`harness export`).

rows (pure: a record -> one row per metric value), sources (run directories, fleet directories,
the history store), write (CSV, JSON Lines, Parquet) and api (the same rows as pandas DataFrames;
pandas and pyarrow are imported only there and in the Parquet writer). `harness export` is
sources + write; api is the entry point for notebooks.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["api", "rows", "sources", "write"]
