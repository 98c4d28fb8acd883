"""The driver-runpath hook as makeSetupHook installs it.

overlays/hooks.nix hands hooks/auto-add-opengl-runpath-hook.sh to makeSetupHook
with `substitutions.driverLink` (nixpkgs' addDriverRunpath.driverLink), and
nixpkgs' makeSetupHook runs substituteAll over it
(pkgs/build-support/trivial-builders/default.nix). Tests source or build with
that substituted file, never the template.
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


def substituted(directory: Path, driver_link: str = DRIVER_LINK) -> Path:
    text = TEMPLATE.read_text().replace("@driverLink@", driver_link)
    left = re.findall(r"@[A-Za-z_][A-Za-z0-9_]*@", text)
    assert not left, f"placeholders makeSetupHook is not given: {left}"
    out = directory / TEMPLATE.name
    out.write_text(text)
    return out


@pytest.fixture(scope="session")
def runpath_hook(tmp_path_factory) -> Path:
    return substituted(tmp_path_factory.mktemp("hook"))
