"""Report renderers: the self-contained HTML acceptance report, JUnit XML, Prometheus text, and fmt
(every number a person reads). outputs.write_reports writes a run's report.html and junit.xml.

views is the explicit registry of the HTML report's section views (section -> view and template);
power_svg, observe_svg, telemetry_svg, audit, gpu_table, charts and drives build those views.
Importing this package is cheap; Jinja2 loads only when an HTML report is rendered. The layers above
use (`__all__`) outputs, files (the reports' file names and their writing, without the renderers),
junit, prometheus, fmt and tplcache; the views are the renderers' own.
"""

# The package's face: its public submodules (none is imported here; import the one you need).
__all__ = ["files", "fmt", "junit", "outputs", "prometheus", "tplcache"]
