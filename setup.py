"""Ship the top-level `rules/` catalog inside the wheel as `fuselint/rules/`.

The rule files live at the top of the repository (one TOML file per rule, the single
source of truth); a wheel has no such folder, so the build copies them into the package.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithRules(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "fuselint" / "rules"
        target.mkdir(parents=True, exist_ok=True)
        for rule in sorted(Path(__file__).parent.joinpath("rules").glob("*.toml")):
            target.joinpath(rule.name).write_bytes(rule.read_bytes())


setup(cmdclass={"build_py": BuildWithRules})
