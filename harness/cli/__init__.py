"""Command line: parse arguments, call the core, map errors to exit codes.

main is the entry point (`harness`, `python -m harness`); the other modules are its subcommands.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["main"]
