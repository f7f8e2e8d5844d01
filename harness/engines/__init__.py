"""Programs the checks start with `python -m` (burn, copy, data path) and their shared I/O."""
