"""Package discovery for the three top-level folders that install as one `eaglebug` namespace
(`eaglebug/` -> eaglebug, `checks/` -> eaglebug.checks, `tui/` -> eaglebug.tui): every folder
with an `__init__.py` under them is a package, so a new subpackage needs no edit here."""

from __future__ import annotations

from setuptools import find_packages, setup

ROOTS = {
    "eaglebug": "eaglebug",
    "eaglebug.checks": "checks",
    "eaglebug.tui": "tui",
}
# examples/sglang-mini ships as data of the demo (eaglebug.demo.sglang_mini), so `eaglebug demo`
# works from a wheel too; it is copied from there, never imported.
DATA = {"eaglebug.demo.sglang_mini": "examples/sglang-mini"}

packages = [*DATA]
for name, folder in ROOTS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir={**ROOTS, **DATA})
