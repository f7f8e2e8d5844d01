"""Command line: parse arguments, call the core, map errors to exit codes.

main maps errors to exit codes; start is the console script's entry (`harness`, `python -m harness`),
which begins a run's first contention look before main loads; the other modules are subcommands.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["main", "start"]
