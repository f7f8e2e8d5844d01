"""Ships the top-level suites/ and profiles/ inside the wheel, as harness/data/{suites,profiles}.

Everything else is in pyproject.toml. The folders stay at the top of the clone, where a user of
the checkout finds them; a clone (and an editable install) reads them there (harness/config/paths.py).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("suites", "profiles")


class BuildWithData(build_py):
    """build_py that also copies the shipped YAML files into the built package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the clone's own folders
            return
        for what in SHIPPED:
            target = Path(self.build_lib) / "harness" / "data" / what
            for src in sorted(Path(what).glob("*.y*ml")):
                self.mkpath(str(target))
                self.copy_file(str(src), str(target / src.name))


setup(cmdclass={"build_py": BuildWithData})
