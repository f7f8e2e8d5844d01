"""Check kinds: one module (or, for fio, one package) per kind, listed explicitly in registry.py.

What the layers above use: registry (kinds(), get()), base (CheckKind, CheckContext, CheckOutput,
PlannedCommand, Need) and needs (shared tool requirements). The rest are the kinds and their helpers
(loadgroup, counterwindow, observer, readiness, gpu_identity, data_path_feed).
"""
