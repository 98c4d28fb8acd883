# closure-audit from this repository's pyproject.toml, with nix on its PATH
# (the closure commands call `nix path-info`).
{
  lib,
  python3Packages,
  nix,
  patchelf,
}:
let
  root = ../..;
  init = builtins.readFile (root + "/tools/closure_audit/__init__.py");
  version = builtins.head (builtins.match ''.*__version__ = "([^"]+)".*'' init);
in
python3Packages.buildPythonApplication {
  pname = "closure-audit";
  inherit version;
  pyproject = true;

  src = lib.fileset.toSource {
    inherit root;
    fileset = lib.fileset.unions [
      (root + "/pyproject.toml")
      (root + "/setup.py")
      (root + "/README.md")
      (root + "/LICENSE")
      (root + "/tools")
      (root + "/lib/data")
      (root + "/docs/reference/schema")
      (root + "/examples")
      (root + "/tests")
    ];
  };

  build-system = [ python3Packages.setuptools ];
  dependencies = with python3Packages; [
    numpy
    igraph
    orjson
    rich
    cryptography # narinfo signatures (--store)
    zstandard # zstd-compressed NARs (--store) and fatbin payloads
    lz4 # fatbin payloads compressed with NVIDIA's LZ (the LZ4 block format)
  ];

  makeWrapperArgs = [
    "--prefix"
    "PATH"
    ":"
    (lib.makeBinPath [ nix ])
  ];

  nativeCheckInputs = [
    python3Packages.pytestCheckHook
    python3Packages.hypothesis
    python3Packages.jsonschema
    python3Packages.networkx
    # The tests compare the ELF reader with an independent one; the tool itself
    # reads ELF with its own validating reader.
    python3Packages.pyelftools
    patchelf
  ];
  # The real CUDA wheels are not in the sandbox; tests that need Nix's daemon
  # or a Debian host's loader skip themselves there.
  disabledTestMarks = [ "wheels" ];
  pythonImportsCheck = [ "closure_audit" ];

  meta = {
    description = "Audit ELF trees and Nix closures the way the dynamic loader and Nix see them";
    license = lib.licenses.mit;
    mainProgram = "closure-audit";
    platforms = lib.platforms.linux;
  };
}
