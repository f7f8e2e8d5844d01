"""Programs the checks start with `python -m` (burn, copy, data path) and their shared I/O.

burn, copy and data_path are the entry points (`python -m harness.engines.burn`, ...); io is their
shared I/O, for the engines only.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["burn", "copy", "data_path"]
