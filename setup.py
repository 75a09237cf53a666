"""Package discovery (everything else is in pyproject.toml).

Every package under generator/ ships: found, not listed by hand (a hand-written list once left
generator.impact and generator.render.clusters out of the wheel; issue 33). templates/ and stacks/ ship
as generator.templates and generator.stacks (pyproject.toml's package-dir): pyproject's
[tool.setuptools.packages.find] finds packages by their folders and cannot name a mapped one, so they are
added here, with templates/' folders of data files (slurm/, bringup/, ...) named as their packages too: a folder
that Python could import but that is in no package list makes setuptools print a "Package would be ignored"
warning per folder at every build, though pyproject's package-data ships its files either way.
tests/test_wheel.py holds the built wheel to the source tree.
"""
from setuptools import find_namespace_packages, find_packages, setup

TEMPLATE_FOLDERS = [f"generator.templates.{name}" for name in find_namespace_packages(where="templates")
                    if "__pycache__" not in name]

setup(packages=find_packages(include=["generator", "generator.*"]) + ["generator.templates", "generator.stacks"]
      + TEMPLATE_FOLDERS)
