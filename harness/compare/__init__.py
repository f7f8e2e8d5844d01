"""Compare: expectations x metrics -> outcomes, pure. The one judge of the harness.

judge.judge is the entry point (the runner calls it once per check; drift judges through it too);
rules holds the Rule type, its bands and how the dry run words it.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["judge", "rules"]
