"""One run on this node: load, plan, run each check, persist, render once.

What the layers above use: session (run(), the `harness run` entry), plan (build, render_dry_run),
finish (errors_of), progress and resume; runner, sampler and settle are the run's own machinery.
"""
