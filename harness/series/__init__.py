"""Pure time-series logic: what checks record and reports read (telemetry, power, PSU, observe).

telemetry (GPU series sampled alongside a check), power and psu (node power and PSU verdicts),
observed and stall (an observe window and what held the work back) are its face (`__all__`);
stallwords is stall's own wording.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["observed", "power", "psu", "stall", "telemetry"]
