"""The catalogue of findings: stable rule ids, default severities, fields.

docs/reference/rules.md describes each rule; tests check the two agree.

Takes: nothing: it is the catalogue. Gives: RULES (Rule: id, default
severity per mode, fields), Finding, has_error.
"""

from __future__ import annotations

from collections import namedtuple


ERROR, WARNING, INFO, OFF = "error", "warning", "info", "off"
SEVERITIES = (ERROR, WARNING, INFO)
SEVERITY_RANK = {ERROR: 0, WARNING: 1, INFO: 2}


def has_error(findings) -> bool:
    return any(f.severity == ERROR for f in findings)


class Rule(namedtuple("Rule", "id nix tree fields summary")):
    """A rule: its id, default severities in nix-store mode (`nix`) and tree
    mode (`tree`; None: not checked there), the fields every finding of it
    carries beyond rule, severity, message and file (the JSON schema's
    `required` for the rule; tests/findings/test_rules.py binds the two) and
    a one-line summary. A named tuple, as every record on the start-up path of
    `archs` is: the dataclasses module and its per-class code generation cost
    that command about 15 of its 50 ms (docs/commands/archs.md)."""

    __slots__ = ()

    def default(self, mode) -> str | None:
        """The default severity in a modes.Mode."""
        return self.nix if mode.nix else self.tree


_RULES = (
    Rule("unresolved-library", ERROR, ERROR, ("needed", "searched", "chain"),
         "A DT_NEEDED library is found nowhere the loader looks."),
    Rule("plugin-unresolved-library", WARNING, WARNING,
         ("needed", "searched", "chain", "plugin", "opener", "feature", "silence"),
         "A library a plugin (only ever opened at run time) needs is found nowhere: its feature fails."),
    Rule("needs-preloaded-library", ERROR, WARNING, ("needed", "providers", "searched", "chain"),
         "A library cannot find a need it relies on the process having loaded already."),
    Rule("preloaded-library", None, WARNING, ("needed", "tree_path", "host_path", "loaded_by", "trigger", "process"),
         "A need gets the tree's copy only because a framework (or an earlier module) loads it first."),
    Rule("optional-library-missing", WARNING, WARNING, ("needed", "module", "feature", "package"),
         "A known optional library is found nowhere: the Python module needing it fails to import."),
    Rule("duplicate-soname", None, WARNING, ("soname", "files"),
         "Two different files with one SONAME can be loaded in one process."),
    Rule("gpu-init-library-missing", None, WARNING, ("framework", "missing", "tree_copies", "rescued_by"),
         "A framework's GPU initialisation cannot open a CUDA library it needs: it runs on the CPU."),
    Rule("import-order-differs", None, WARNING, ("library", "orders", "objects"),
         "Importing the frameworks in another order gives a need another file, or none (information when both load)."),
    Rule("identical-library-copies", None, INFO, ("files", "sha256"),
         "Byte-identical copies of one library (one SONAME, or one CUDA library family) can be mapped in one process."),
    Rule("distribution-file-conflict", None, WARNING, ("paths", "distributions", "on_disk", "losers"),
         "Two installed distributions claim the same files in their RECORD with different bytes; the last installed won."),
    Rule("library-releases-differ", ERROR, ERROR, ("partner", "version", "partner_version", "agree"),
         "CUDA libraries that must be one release (cuBLAS and cuBLASLt, NVRTC and its builtins, cuDNN's parts) "
         "or one CUDA major (nvJitLink and the runtime) are not."),
    Rule("framework-library-build-differs", None, WARNING, ("framework", "library", "process", "found", "built"),
         "A framework's process maps a cuDNN or NCCL older than it was built against, or built for another CUDA major."),
    Rule("triton-libcuda-ldconfig", WARNING, None, ("variable", "driver_dirs"),
         "Triton in a Nix store path finds libcuda.so.1 with ldconfig -p, which fails on NixOS."),
    Rule("triton-tool-missing", WARNING, WARNING, ("tool", "variable", "default"),
         "Triton runs an NVIDIA tool (ptxas, ...) from its variable, else a default that is missing or cannot run."),
    Rule("duplicate-library-family", None, WARNING, ("family", "files", "sonames"),
         "Two copies of one CUDA library under different SONAMEs can be loaded in one process."),
    Rule("runpath-shadowable", None, INFO, ("needed", "host_path", "objects"),
         "A CUDA library resolves in the tree through DT_RUNPATH, which LD_LIBRARY_PATH naming the host's copy beats."),
    Rule("resolved-on-host", None, WARNING, ("needed", "host_path"),
         "A library outside the C runtime family resolves only from outside the tree."),
    Rule("cuda-library-from-host", None, ERROR, ("needed", "host_path"),
         "A CUDA library the tree needs (not a driver library) resolves only from the host."),
    Rule("missing-driver-runpath", ERROR, None, ("needed",),
         "An object needs or opens a driver library but has no driver directory in its runpath."),
    Rule("stub-in-runpath", ERROR, ERROR, ("entry", "tag"),
         "A runpath directory holds a stub driver library that would load instead of the driver."),
    Rule("runpath-missing-dir", WARNING, WARNING, ("entry", "tag"),
         "A runpath entry names a directory that does not exist."),
    Rule("runpath-stale-dir", INFO, INFO, ("entry", "tag"),
         "A runpath entry names a directory that does not exist, on an object whose every need resolves."),
    Rule("runpath-impure", ERROR, WARNING, ("entry", "tag"),
         "A runpath entry leaves the store (nix-store mode) or the tree (tree mode)."),
    Rule("runpath-empty-entry", WARNING, WARNING, ("entry", "tag"),
         "An empty runpath component, which the loader reads as the working directory."),
    Rule("interpreter-outside-store", ERROR, None, ("interpreter",),
         "A program in the store names an interpreter (PT_INTERP) outside the store."),
    Rule("ambiguous-library", WARNING, WARNING, ("needed", "winner", "others"),
         "Two runpath directories of one object offer different files under one name."),
    # What objects open at run time (dlopen), named in their read-only data.
    Rule("unresolved-dlopen-library", ERROR, ERROR, ("needed", "string", "offset", "class", "searched", "chain"),
         "A CUDA toolkit library an object opens at run time is not in the closure or tree."),
    Rule("recommended-dlopen-library", WARNING, WARNING,
         ("needed", "string", "offset", "class", "searched", "chain"),
         "A library an object's dlopen note recommends is not in the closure or tree."),
    Rule("dlopen-fallback-name", INFO, INFO,
         ("needed", "loaded", "searched", "chain", "string", "offset", "class"),
         "A name without a version is opened; glibc does not take the loaded versioned library for it."),
    Rule("optional-dlopen-library", INFO, INFO, ("needed", "string", "offset", "class", "searched", "chain"),
         "An optional library an object may open at run time is not found: what needs it is off."),
    Rule("unknown-dlopen-library", INFO, INFO, ("needed", "string", "offset", "class", "searched", "chain"),
         "A library of no known class an object may open at run time is not found."),
    # What glibc checks once the files are found (audit; undefined-symbol with --symbols).
    Rule("symbol-version-missing", ERROR, ERROR, ("needed", "version", "provider", "newest"),
         "An object requires a symbol version that the library its need resolves to does not define."),
    Rule("undefined-symbol", ERROR, ERROR, ("symbol", "version", "root", "provider"),
         "An object bound at load time has an undefined symbol that nothing in its load scope defines."),
    # What a process really loaded (trace).
    Rule("library-loaded-twice", WARNING, WARNING, ("library", "paths"),
         "One process mapped the same library from two files."),
    Rule("cuda-library-host-over-tree", ERROR, ERROR, ("library", "path", "tree_copy"),
         "A process loaded a CUDA toolkit library from the host although the tree holds its own copy."),
    Rule("cuda-library-host-loaded", WARNING, WARNING, ("library", "path"),
         "A process loaded a CUDA toolkit library from the host; the tree holds no copy."),
    Rule("driver-not-host-driver", WARNING, WARNING, ("path", "host_driver"),
         "A process loaded a libcuda.so.1 that is not the host's driver library."),
    Rule("trace-differs-from-audit", WARNING, WARNING, ("library", "path", "predicted"),
         "A process loaded another file for a name than audit's model predicts."),
    Rule("invalid-elf", WARNING, WARNING, ("reason",),
         "A file that cannot be read as ELF, or cannot be read at all."),
    # Closure rules (why, gate): closures are always in the store.
    Rule("forbidden-path", ERROR, None, ("pattern", "reason", "added_size", "chain", "hops"),
         "The runtime closure holds a path the policy forbids."),
    Rule("closure-budget", ERROR, None, ("target", "closure_size", "limit"),
         "A closure is larger than its budget."),
    Rule("closure-growth", ERROR, None, ("target", "closure_size", "baseline_size", "limit"),
         "A closure grew more than allowed against its baseline."),
    Rule("added-size-budget", ERROR, None, ("target", "added_size", "limit"),
         "One path adds more to a closure than allowed."),
    # Host rules (doctor): will CUDA programs run on this machine.
    Rule("driver-missing", ERROR, ERROR, ("fixes",),
         "The host has no NVIDIA driver library, or its kernel module is not loaded."),
    Rule("driver-unreachable", ERROR, ERROR, ("fixes",),
         "The target's programs cannot reach the host's driver library."),
    Rule("no-driver-directory", WARNING, WARNING, ("fixes",),
         "The host keeps its driver where Nix programs do not look (no /run/opengl-driver/lib)."),
    Rule("driver-version-unknown", WARNING, WARNING, ("fixes",),
         "The user-space driver's version cannot be told, so it cannot be checked."),
    Rule("driver-kernel-mismatch", ERROR, ERROR, ("fixes", "user_version", "kernel_version"),
         "The user-space driver and the loaded kernel module are different versions."),
    Rule("driver-too-old", ERROR, ERROR, ("fixes", "runtime", "needs", "driver"),
         "The driver is older than the target's CUDA runtime needs."),
    Rule("driver-minor-compat", WARNING, WARNING, ("fixes", "runtime", "needs", "driver"),
         "The driver runs the target's CUDA runtime through minor version compatibility only."),
    Rule("cuda-runtime-missing", ERROR, ERROR, ("fixes", "needed", "wheel"),
         "The target needs a CUDA runtime that neither it nor the host holds."),
    Rule("gpu-not-found", ERROR, ERROR, ("fixes",),
         "No NVIDIA GPU is found on the host."),
    Rule("gpu-capability-unknown", WARNING, WARNING, ("fixes",),
         "A GPU's compute capability cannot be told, so its GPU code cannot be checked."),
    Rule("gpu-capability-mismatch", WARNING, WARNING, ("fixes", "capability", "model_capability"),
         "nvidia-smi's compute capability of a GPU differs from the model table's for its name."),
    Rule("no-kernel-image", ERROR, ERROR, ("fixes", "capability", "files"),
         "A GPU of the host runs none of the GPU code in some of the target's files."),
    # GPU code rules (archs).
    Rule("missing-gpu-arch", ERROR, ERROR, ("capability", "needs", "codes"),
         "A file's GPU code cannot serve a requested capability."),
    Rule("unexpected-gpu-arch", WARNING, WARNING, ("code", "stored", "entries", "sections"),
         "GPU code no requested capability can use: bytes pruning would save."),
    Rule("jit-only-gpu-arch", WARNING, WARNING, ("capability", "ptx"),
         "A requested capability runs only by JIT-compiling PTX: no cubin runs on it."),
    Rule("native-arch-fallback", ERROR, ERROR, ("codes",),
         "Only sm_75 and compute_75, 7.5 not requested: what -arch=native builds without a GPU."),
    Rule("invalid-fatbin", ERROR, ERROR, ("reason",),
         "A fatbin section that cannot be read, so its GPU code is unknown."),
)
RULES = {r.id: r for r in _RULES}


class Finding:
    __slots__ = ("rule", "severity", "message", "file", "fields")

    def __init__(self, rule: str, severity: str, message: str, file: str, fields: dict | None = None):
        self.rule = rule
        self.severity = severity
        self.message = message
        self.file = file
        self.fields = {} if fields is None else fields

    def __eq__(self, other) -> bool:
        if not isinstance(other, Finding):
            return NotImplemented
        return (self.rule, self.severity, self.message, self.file, self.fields) == (
            other.rule, other.severity, other.message, other.file, other.fields)

    def __repr__(self) -> str:
        return f"Finding({self.rule!r}, {self.severity!r}, {self.message!r}, {self.file!r}, {self.fields!r})"

    def to_json(self) -> dict:
        return {"rule": self.rule, "severity": self.severity, "message": self.message,
                "file": self.file, **self.fields}

    def sort_key(self) -> tuple:
        return (SEVERITY_RANK.get(self.severity, 9), self.rule, self.file, str(sorted(self.fields.items())))
