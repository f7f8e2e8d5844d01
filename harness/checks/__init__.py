"""Check kinds: one module (or, for fio, one package) per kind, listed explicitly in registry.py.

What the layers above use (`__all__`): registry (kinds(), get()), base (CheckKind, CheckContext,
CheckOutput, PlannedCommand, Need), needs (shared tool requirements), readiness (`harness list
--tools`), observer (the `harness observe` loop), and for the run's telemetry afterload, gpu_health and
gpu_identity. The rest are the kinds and their own helpers (loadgroup, counterwindow, data_path_feed).
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["afterload", "base", "gpu_health", "gpu_identity", "needs", "observer", "readiness", "registry"]
