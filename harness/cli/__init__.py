"""Command line: parse arguments, call the core, map errors to exit codes."""
