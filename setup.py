"""The one thing pyproject.toml cannot say: the repository's top-level `themes/` folder ships
inside the wheel as `ezpz_tui/themes/`. `packages.find` only finds packages where they lie,
so the package list is found here and the mapped theme folder added to it; a new subpackage
under `ezpz_tui/` or `runtime/` is found without touching this file."""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages(include=["runtime", "runtime.*", "ezpz_tui", "ezpz_tui.*"]),
        "ezpz_tui.themes",
    ],
    package_dir={"ezpz_tui.themes": "themes"},
)
