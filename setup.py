"""Package discovery (everything else is in pyproject.toml).

Every package under generator/ ships: found, not listed by hand (a hand-written list once left
generator.impact and generator.render.clusters out of the wheel; issue 33). templates/ and stacks/ ship
as generator.templates and generator.stacks (pyproject.toml's package-dir): pyproject's
[tool.setuptools.packages.find] finds packages by their folders and cannot name a mapped one, so they are
added here. tests/test_wheel.py holds the built wheel to the source tree.
"""
from setuptools import find_packages, setup

setup(packages=find_packages(include=["generator", "generator.*"]) + ["generator.templates", "generator.stacks"])
