"""Pure parsers: tool output text in, ParseResult out. No I/O, no subprocesses.

base (ParseResult and helpers) and registry (the `harness parse` kinds); one module per tool format.
"""
