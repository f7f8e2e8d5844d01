"""One run on this node: load, plan, run each check, persist, render once.

What the layers above use (`__all__`): session (run(), the `harness run` entry), plan (build,
render_dry_run), finish (errors_of), progress, resume, observe (`harness observe`), early (the gate's
first look, begun by the console script before the CLI loads) and nodeload (first_look, which the
CLI takes itself when early has none; Snapshot); runner, sampler, settle and retention are the run's own
machinery.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["contention", "early", "finish", "nodeload", "observe", "plan", "progress", "resume", "session"]
