"""One run on this node: load, plan, run each check, persist, render once."""
