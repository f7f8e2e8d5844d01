"""Report renderers: the self-contained HTML acceptance report, JUnit XML, Prometheus text, and fmt
(every number a person reads). outputs.write_reports writes a run's report.html and junit.xml.

Importing this package is cheap; Jinja2 loads only when an HTML report is rendered.
"""
