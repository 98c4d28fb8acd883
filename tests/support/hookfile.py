"""The hooks as makeSetupHook installs them.

overlays/hooks.nix hands hooks/auto-add-opengl-runpath-hook.sh to makeSetupHook
with `substitutions.driverLink` (nixpkgs' addDriverRunpath.driverLink), and
hooks/split-redist-outputs.sh with `substitutions.redistSplitRules` (the text
of lib/data/redist-split-rules.txt); nixpkgs' makeSetupHook runs
substituteAll over them (pkgs/build-support/trivial-builders/default.nix).
Tests source or build with those substituted files, never the templates.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

TEMPLATE = ROOT / "hooks/auto-add-opengl-runpath-hook.sh"
# addDriverRunpath.driverLink on every platform but i686-linux
# (pkgs/by-name/ad/addDriverRunpath/package.nix).
DRIVER_LINK = "/run/opengl-driver"


SPLIT_TEMPLATE = ROOT / "hooks/split-redist-outputs.sh"
SPLIT_RULES = ROOT / "lib/data/redist-split-rules.txt"


def _substitute(template: Path, directory: Path, **values: str) -> Path:
    text = template.read_text()
    for name, value in values.items():
        text = text.replace(f"@{name}@", value)
    left = re.findall(r"@[A-Za-z_][A-Za-z0-9_]*@", text)
    assert not left, f"placeholders makeSetupHook is not given: {left}"
    out = directory / template.name
    out.write_text(text)
    return out


def substituted(directory: Path, driver_link: str = DRIVER_LINK) -> Path:
    return _substitute(TEMPLATE, directory, driverLink=driver_link)


def split_substituted(directory: Path) -> Path:
    return _substitute(SPLIT_TEMPLATE, directory, redistSplitRules=SPLIT_RULES.read_text())


@pytest.fixture(scope="session")
def runpath_hook(tmp_path_factory) -> Path:
    return substituted(tmp_path_factory.mktemp("hook"))


@pytest.fixture(scope="session")
def split_hook(tmp_path_factory) -> Path:
    return split_substituted(tmp_path_factory.mktemp("split-hook"))
