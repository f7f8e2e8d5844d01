"""The configuration audit: judge collected facts against a profile's `config:` rules, and
capture a known-good node's facts as a golden profile.

judge is the entry point for judging (the config_audit check); capture for
`harness audit capture`.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["capture", "judge"]
