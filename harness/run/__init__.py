"""One run on this node: load, plan, run each check, persist, render once.

What the layers above use (`__all__`): session (run(), the `harness run` entry), plan (build,
render_dry_run), finish (errors_of), progress, resume and observe (`harness observe`); runner, sampler,
settle, contention and retention are the run's own machinery.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["finish", "observe", "plan", "progress", "resume", "session"]
