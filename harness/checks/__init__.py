"""Check kinds: one module per kind, listed explicitly in registry.py."""
