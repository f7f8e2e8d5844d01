"""Fleet: dispatch a suite on Slurm, collect each node's run, judge the fleet, drain, export.

dispatch (sbatch/squeue/scontrol through platform.slurm) -> layout (the fleet directory) ->
collect (node outcomes, pure judge) -> analysis + stats (verdict, robust outliers, pure) ->
report/html (fleet.json, junit.xml, fleet.html) -> drain (scontrol) and report.prometheus.

What the layers above use (`__all__`): commands (the `harness fleet` entry), k8s (`harness k8s
render`), layout (fleet directories and results volumes), dispatch, collect and analysis.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["analysis", "collect", "commands", "dispatch", "k8s", "layout"]
