"""Pure parsers: tool output text in, ParseResult out. No I/O, no subprocesses."""
