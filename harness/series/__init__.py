"""Pure time-series logic: what checks record and reports read (telemetry, power, PSU, observe).

telemetry (GPU series sampled alongside a check), power and psu (node power and PSU verdicts),
observed and stall (an observe window and what held the work back); stallwords words them.
"""
