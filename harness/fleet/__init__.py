"""Fleet: dispatch a suite on Slurm, collect each node's run, judge the fleet, drain, export.

dispatch (sbatch/squeue/scontrol through platform.slurm) -> layout (the fleet directory) ->
collect (node outcomes, pure judge) -> analysis + stats (verdict, robust outliers, pure) ->
report/html (fleet.json, junit.xml, fleet.html) -> drain (scontrol) and report.prometheus.
"""
