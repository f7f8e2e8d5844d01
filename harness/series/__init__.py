"""Pure time-series logic: what checks record and reports read (telemetry, power, PSU)."""
