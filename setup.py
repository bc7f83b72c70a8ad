"""Package discovery: every folder with an `__init__.py` under `eaglebug/` is a package, so a new
subpackage needs no edit here; and the demo's SGLang-shaped tree as package data."""

from __future__ import annotations

from setuptools import find_packages, setup

# examples/sglang-mini ships as data of the demo (eaglebug.demo.sglang_mini), so `eaglebug demo`
# works from a wheel too; it is copied from there, never imported.
DATA = {"eaglebug.demo.sglang_mini": "examples/sglang-mini"}

packages = [*DATA, "eaglebug", *(f"eaglebug.{sub}" for sub in find_packages("eaglebug"))]

setup(packages=packages, package_dir={"eaglebug": "eaglebug", **DATA})
