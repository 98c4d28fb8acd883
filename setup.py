"""Every package under tools/ is found, so none can be left out of the wheel;
pyproject.toml's static `packages` cannot also name nixcuda_data, which lives
in lib/data (package-dir in pyproject.toml)."""

from setuptools import find_namespace_packages, setup

setup(packages=find_namespace_packages("tools", exclude=["*.__pycache__", "__pycache__"]) + ["nixcuda_data"])
