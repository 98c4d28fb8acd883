"""Building closureAuditCheck (pkgs/closure-audit/check.nix) without nixpkgs.

The check takes nixpkgs' runCommand and closureInfo; here they are plain
`builtins.derivation`s that do what nixpkgs' do (the files they follow are
named below), run by the host's shell and Python (Debian's nix-bin builds
with the sandbox off), with closure-audit from the environment under test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from nixstore import PRELUDE

# The environment whose bin/ holds the closure-audit under test.
ENVIRONMENT = Path(sys.executable).parent.parent

BUILDERS = f"""
let
  hostPath = "/usr/local/bin:/usr/bin:/bin";
  binPath = ps: builtins.concatStringsSep ":" (map (p: "${{p}}/bin") ps);
  # pkgs/build-support/trivial-builders/default.nix: runCommand NAME ENV
  # COMMAND is a derivation with ENV's attributes that runs COMMAND, its
  # nativeBuildInputs' bin/ on PATH; passthru is on the result, not in the
  # builder's environment.
  runCommand = name: env: buildCommand:
    let
      drv = builtins.derivation (builtins.removeAttrs env [ "passthru" "nativeBuildInputs" ] // {{
        inherit name system;
        builder = "/bin/bash";
        args = [ "-ec" buildCommand ];
        PATH = binPath (env.nativeBuildInputs or [ ]) + ":" + hostPath;
      }});
    in
    drv // (env.passthru or {{ }});
  # pkgs/build-support/closure-info.nix: structured attributes and
  # exportReferencesGraph.closure; registration (path, narHash, narSize, an
  # empty deriver, the reference count and the references, a line each),
  # store-paths and total-nar-size. nixpkgs writes them with jq; Python here.
  closureInfo = {{ rootPaths }}: builtins.derivation {{
    name = "closure-info";
    inherit system;
    __structuredAttrs = true;
    exportReferencesGraph.closure = rootPaths;
    PATH = hostPath;
    builder = "/bin/bash";
    args = [ "-ec" ''
      . "''${{NIX_ATTRS_SH_FILE:-./.attrs.sh}}"
      out=''${{outputs[out]}}
      mkdir "$out"
      python3 - "''${{NIX_ATTRS_JSON_FILE:-./.attrs.json}}" "$out" <<'PY'
      import json, sys
      closure = json.load(open(sys.argv[1]))["closure"]
      out = sys.argv[2]
      open(out + "/total-nar-size", "w").write("%d\\n" % sum(e["narSize"] for e in closure))
      lines = []
      for e in closure:
          lines += [e["path"], e["narHash"], str(e["narSize"]), "", str(len(e["references"]))] + e["references"]
      open(out + "/registration", "w").write("".join(l + "\\n" for l in lines))
      open(out + "/store-paths", "w").write("".join(e["path"] + "\\n" for e in closure))
      PY
    '' ];
  }};
  closureAuditCheck = import {ROOT}/pkgs/closure-audit/check.nix {{
    inherit runCommand closureInfo;
    closure-audit = "{ENVIRONMENT}";
    python3 = "/usr";
  }};
in
"""


def build(tmp_path: Path, body: str, attr: str) -> subprocess.CompletedProcess:
    """nix-build `attr` of PRELUDE + BUILDERS + body; the process, failed or not."""
    expr = tmp_path / "checks.nix"
    expr.write_text(PRELUDE + BUILDERS + body)
    cmd = ["nix-build", str(expr), "-A", attr, "--no-out-link", "--option", "substituters", ""]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
