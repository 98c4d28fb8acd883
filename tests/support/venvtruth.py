"""Ground truth from the real loader on a real venv, recorded as a fixture.

For each process the model lists (one per framework, the union in each
import order asked for), a fresh process of the venv's own Python does
what that process stands for, for real: it imports each framework, then
each of its extension modules by name (with ctypes where a Python-level
error stops the import first), then what the framework does at first use
(cuda-bindings' wrappers, JAX's plugin initialization, TensorFlow's GPU
initialisation, Triton's profiler's CUPTI), and reads /proc/self/maps.
No GPU is needed: stand-in libcuda.so.1 and libnvidia-ml.so.1, built with
gcc, report one device, so TensorFlow and JAX try to open their libraries.

The fixture keeps, per ELF file of site-packages, what the loader reads
(SONAME, DT_NEEDED, RPATH, RUNPATH), the preloads the model read from the
frameworks' own files, and per process the real loader's answer: for
each CUDA soname the files mapped, and each extension module whose load
failed with the name found nowhere. Paths are relative to site-packages;
the stand-ins' are `driver/NAME`. venvstub.py rebuilds an equivalent tree.

    .venv/bin/python tests/support/venvtruth.py VENV OUT.json [--order a,b ...]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict

from closure_audit.elf.reader import read_elf
from closure_audit.policy.load import parse_policy
from closure_audit.loader.environment import matches_any
from closure_audit.loader.libraries import CUDA_TOOLKIT_LIBRARIES
from closure_audit.loader.process import UNION, module_of
from audits import audit as run_audit
from standin import standin

VERSION = 1

def policy(driver: str):
    """The host as the recording saw it: the stand-ins' directory, then the
    C runtime's (no CUDA of the host)."""
    libc = [d for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
            if os.path.exists(os.path.join(d, "libc.so.6"))]
    return parse_policy({"host": {"directories": [driver, *libc]}})


def site_of(venv: str) -> str:
    (site,) = glob.glob(os.path.join(venv, "lib", "python*", "site-packages"))
    return os.path.realpath(site)


def libraries(site: str) -> dict[str, dict]:
    """What the loader reads of every ELF file under site: relative path ->
    its dynamic facts, or {"link": target} for a symlink."""
    out = {}
    for top, dirs, files in os.walk(site):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            rel = os.path.relpath(path, site)
            if os.path.islink(path):
                if ".so" in name:
                    out[rel] = {"link": os.readlink(path)}
                continue
            if ".so" not in name:
                continue
            try:
                elf = read_elf(path)
            except Exception:
                continue
            if elf is None or not elf.has_dynamic:
                continue
            out[rel] = {k: v for k, v in (("soname", elf.soname), ("needed", list(elf.needed)),
                                          ("rpath", _absent(elf.rpath)), ("runpath", _absent(elf.runpath))) if v}
    return out


def _absent(search: str | None) -> str | None:
    """A search path whose entries of the build machine's home or scratch
    directories (Triton's /root/.triton/llvm/...), absent here, are kept
    absent under /absent: the loader skips them alike, and the fixture names
    no such directory."""
    if search is None:
        return None
    return ":".join("/absent" + e if e.startswith(("/root/", "/tmp/", "/work/", "/home/")) and not os.path.exists(e)
                    else e for e in search.split(":"))


def relative(path: str, site: str, driver: str) -> str:
    real = os.path.realpath(path)
    if real.startswith(driver + "/"):
        return "driver/" + os.path.basename(real)
    return os.path.relpath(real, site)


def cuda_name(rel: str, libs: dict) -> str | None:
    """The CUDA soname of a file (its SONAME, else its name), or None."""
    name = libs.get(rel, {}).get("soname") or os.path.basename(rel)
    return name if matches_any(name, CUDA_TOOLKIT_LIBRARIES) else None


def answer(files, failed, site: str, driver: str, libs: dict) -> dict:
    """One process's answer in the fixture's terms: CUDA soname -> the files
    mapped, and [module, name found nowhere] of each module load that failed."""
    cuda: dict[str, list[str]] = {}
    for path in files:
        rel = relative(path, site, driver)
        if rel.startswith("..") or rel.startswith("/"):
            continue
        name = cuda_name(rel, libs)
        if name and not rel.startswith("driver/"):
            cuda.setdefault(name, []).append(rel)
    return {"cuda": {k: sorted(set(v)) for k, v in sorted(cuda.items())},
            "failed": [list(f) for f in sorted({(relative(p, site, driver), m) for p, m in failed})]}


def model_answer(proc, opened, site: str, driver: str, libs: dict, gone=()) -> dict:
    """The model's answer for a Process: the files it maps, the modules
    whose load fails, and where the names objects dlopen at run time
    resolve (the report's opened rows): a library the loader maps only
    because a library opened it is judged there."""
    failed = [(chain.root.real, missing) for chain, missing, _ in proc.failed
              if chain.objects and module_of(chain.root.real, [site])
              and not any(module_of(chain.root.real, [site])[1].startswith(g) for g in gone)]
    objects = [o for o in proc.link_map.objects if proc.framework_of(o) not in gone]
    out = answer([o.real for o in objects], failed, site, driver, libs)
    mapped = {o.real for o in objects}
    found: dict[str, set] = {}
    for row in opened:
        if row.path and os.path.realpath(row.file) in mapped:
            found.setdefault(row.name, set()).add(relative(row.path, site, driver))
    out["opened"] = {k: sorted(v) for k, v in sorted(found.items())}
    if proc.opened and "tensorflow" not in gone:  # a GPU initialisation: it registers the GPU when no dlopen fails
        out["gpu"] = all(path is not None for _preload, path in proc.opened)
    return out


def modules(site: str, packages) -> list[tuple[str, str]]:
    """(dotted name, path) of every extension module of the packages, in the model's order."""
    out = []
    for pkg in packages:
        for top, dirs, files in os.walk(os.path.join(site, pkg)):
            for name in files:
                m = module_of(os.path.join(top, name), [site])
                if m is not None and not os.path.islink(os.path.join(top, name)):
                    out.append((m[0], m[1], os.path.join(top, name)))
    return [(dotted, path) for _stem, dotted, path in sorted(out)]


# What each framework does at first use that loads libraries, by package,
# read from what the framework's users call (never from the model's
# preloads): before its modules ("early": CuPy's first compile, which is
# what imports cupy.cuda.jitify) or after them.
FIRST_USE = {
    "cupy": ("early", ["from cupy_backends.cuda.libs import nvrtc; nvrtc.getVersion()"]),
    "jax_plugins": ("late", ["import jax; jax.devices()"]),
    "tensorflow": ("late", ["import tensorflow as tf; say(gpus=len(tf.config.list_physical_devices('GPU')))"]),
    "triton": ("late", ["import triton.knobs as k; ctypes.CDLL(os.path.join(k.proton.cupti_lib_dir, 'libcupti.so'))"]),
}


def first_use(package: str, site: str) -> tuple[str, list[str]]:
    if package == "cuda":  # every cuda-bindings wrapper's first call
        wrappers = sorted(n.split(".")[0] for n in os.listdir(os.path.join(site, "cuda/bindings/_internal"))
                          if n.endswith(".so")) if os.path.isdir(os.path.join(site, "cuda/bindings/_internal")) else []
        return "late", [f"import cuda.bindings._internal.{w} as m; m._inspect_function_pointers()" for w in wrappers
                        if w not in ("utils", "driver", "runtime", "runtime_ptds")]
    return FIRST_USE.get(package, ("late", []))


def plan(proc, site: str) -> list[list[str]]:
    """The real process's steps for a model process: per framework in its
    order, its import, its modules, with its first-use code."""
    steps = []
    for fw in proc.frameworks:
        packages = [p for p in proc.packages if p == fw or p.startswith(fw)] or [fw]
        uses = [first_use(p, site) for p in packages]
        steps.append(["import", fw])
        steps += [["call", c] for when, codes in uses if when == "early" for c in codes]
        for dotted, path in modules(site, packages):
            steps.append(["module", dotted, path])
        steps += [["call", c] for when, codes in uses if when == "late" for c in codes]
    return steps


CHILD = r"""
import ctypes, importlib, json, os, sys
steps = json.load(open(sys.argv[1]))
skip = set(json.loads(sys.argv[3]))
out = open(sys.argv[2], "w")
LOADER = ("cannot open shared object file", "undefined symbol", "version `", "wrong ELF class")
def say(**kw):
    out.write(json.dumps(kw) + "\n"); out.flush()
for i, step in enumerate(steps):
    if i in skip:
        say(end=i, how="skipped", error=None)
        continue
    say(begin=i)
    error, how = None, step[0]
    try:
        if step[0] == "import":
            importlib.import_module(step[1])
        elif step[0] == "module":
            # As user code reaches it (cupy.cuda.cufft): through the parent's
            # attribute, which a lazy __getattr__ answers with its own loads first.
            parent, _, child = step[1].rpartition(".")
            try:
                try:
                    getattr(importlib.import_module(parent), child)
                except AttributeError:
                    importlib.import_module(step[1])
            except BaseException as e:
                # The file's own load decides: a loader error of another module
                # its init imports (cupyx._cutensor's of cupy's cutensor) is not its.
                how = "ctypes"
                try:
                    ctypes.CDLL(step[2], mode=os.RTLD_NOW)
                except OSError as own:
                    error = f"OSError: {own}"
        elif step[0] == "call":
            exec(step[1])
    except BaseException as e:
        error = f"{type(e).__name__}: {e}"
    say(end=i, how=how, error=None if error is None else error[:400])
with open("/proc/self/maps") as f:
    say(maps=sorted({l.split(maxsplit=5)[5].strip() for l in f if len(l.split(maxsplit=5)) == 6}))
"""


def real(python: str, steps, driver: str, timeout: int = 900) -> dict:
    """Run the steps in a fresh process of python; a step that kills it is
    skipped in a rerun (and recorded as such)."""
    skip: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        plan_file, out_file = os.path.join(tmp, "plan.json"), os.path.join(tmp, "out.jsonl")
        with open(plan_file, "w") as f:
            json.dump(steps, f)
        env = dict(os.environ, LD_LIBRARY_PATH=driver, TF_CPP_MIN_LOG_LEVEL="0", CUDA_VISIBLE_DEVICES="0",
                   JAX_PLATFORMS="", PYTHONDONTWRITEBYTECODE="1")
        for _ in range(len(steps) + 1):
            p = subprocess.run([python, "-c", CHILD, plan_file, out_file, json.dumps(skip)], env=env,
                               capture_output=True, text=True, timeout=timeout)
            lines = [json.loads(x) for x in open(out_file).read().splitlines() if x.strip()]
            done = [x for x in lines if "maps" in x]
            if done:
                return {"steps": {x["end"]: x for x in lines if "end" in x}, "maps": done[0]["maps"],
                        "gpus": next((x["gpus"] for x in lines if "gpus" in x), None),
                        "skipped": skip, "stderr": p.stderr}
            began = [x["begin"] for x in lines if "begin" in x]
            if began and steps[began[-1]][0] == "import" and began[-1] not in skip and began[-1] > 0:
                # A framework whose import kills the process (Triton's after TensorFlow's):
                # none of its steps is run, and neither side's answer counts its loads.
                j = began[-1]
                end = next((k for k in range(j + 1, len(steps)) if steps[k][0] == "import"), len(steps))
                print(f"skipped, its import kills the process: {steps[j][1]}", file=sys.stderr)
                skip += [k for k in range(j, end) if k not in skip]
                continue
            if not began or began[-1] in skip:
                raise RuntimeError(f"the real process died at {steps[began[-1]] if began else None} (skipped {skip}): {p.stderr[-1500:]}")
            if steps[began[-1]][0] == "call":
                print(f"skipped, it kills the process: {steps[began[-1]][1]}", file=sys.stderr)
                skip.append(began[-1])
                continue
            # A module whose load kills the process (TensorFlow's, registering an op
            # twice): it and the later modules of its package are not loaded.
            top = steps[began[-1]][1].split(".")[0]
            skip += [j for j in range(began[-1], len(steps))
                     if steps[j][0] == "module" and steps[j][1].split(".")[0] == top and j not in skip]
    raise RuntimeError("the real process never finished")


def real_answer(result, steps, site: str, driver: str, libs: dict) -> dict:
    failed = []
    for i, step in enumerate(steps):
        error = result["steps"].get(i, {}).get("error")
        if step[0] == "module" and error and any(s in error for s in ("cannot open shared object file",)):
            missing = error.split("OSError: ")[-1].split(":")[0].strip()
            failed.append((step[2], missing))
    out = answer([m for m in result["maps"] if m.startswith("/")], failed, site, driver, libs)
    if result.get("gpus") is not None:  # TensorFlow's GPU initialisation: whether it registered the device
        out["gpu"] = result["gpus"] > 0
    return out


def preload_record(p, site: str) -> dict:
    d = asdict(p)
    d["path"] = p.path if p.opener or p.host else os.path.relpath(p.path, site)
    if p.host is None:
        del d["host"]  # a name the host answers (cuda-pathfinder's fallback): kept only where there is one
    else:
        d["host"] = {k: list(v) for k, v in asdict(p.host).items()}
    d["opener"] = os.path.relpath(p.opener, site) if p.opener else None
    d["unless"] = list(p.unless)
    d["along"] = os.path.relpath(p.along, site) if p.along else None
    return d


def record(venv: str, orders: list[tuple[str, ...]], driver: str) -> dict:
    from closure_audit.loader.preloads import read_preloads
    import closure_audit.pipeline.audit as pipeline

    site = site_of(venv)
    python = os.path.join(venv, "bin", "python")
    libs = libraries(site)
    seen: list = []
    real_read = pipeline.read_preloads

    def keep(roots, listing):
        found = real_read(roots, listing)
        seen[:] = found.preloads
        return found

    pipeline.read_preloads = keep
    try:
        processes = []
        for n, order in enumerate(orders or [()]):
            report = run_audit(venv, policy=policy(driver), import_order=order or None)
            for row in report.opened if not n else ():  # the strings a stub must hold for the same rows
                rel = relative(row.file, site, driver)
                if row.priority is None and rel in libs and row.string not in libs[rel].get("opens", ()):
                    libs[rel].setdefault("opens", []).append(row.string)
            for proc in report.processes:
                if n and proc.name != UNION:
                    continue
                steps = plan(proc, site)
                result = real(python, steps, driver)
                truth = real_answer(result, steps, site, driver, libs)
                said = model_answer(proc, report.opened, site, driver, libs)
                skipped = sorted(relative(steps[j][2], site, driver) for j in result["skipped"] if steps[j][0] == "module")
                gone = [steps[j][1] for j in result["skipped"] if steps[j][0] == "import"]
                if gone:
                    said = model_answer(proc, report.opened, site, driver, libs, gone)
                if not (truth["cuda"] or truth["failed"] or said["cuda"] or said["failed"]):
                    continue  # no CUDA library, no failed load: nothing to hold the model to
                processes.append({
                    "name": proc.name, "frameworks": list(proc.frameworks), "real": truth,
                    "steps": [[s[0], s[1]] for s in steps],
                    "errors": {str(i): scrub(r["error"], site, venv, driver)[:160]
                               for i, r in sorted(result["steps"].items()) if r.get("error")},
                    "skipped": skipped, "skipped_frameworks": gone,
                    "model_differs": differences(truth, said, skipped)})
                print(f"{proc.name} {'/'.join(proc.frameworks)}: {len(truth['cuda'])} CUDA sonames, "
                      f"{len(truth['failed'])} failed loads, {len(processes[-1]['model_differs'])} differences",
                      file=sys.stderr)
    finally:
        pipeline.read_preloads = real_read
    return {"version": VERSION, "python": os.path.basename(os.path.dirname(site)),
            "distributions": distributions(site),
            "packages": sorted(n for n in os.listdir(site) if n.isidentifier() and os.path.isdir(os.path.join(site, n))),
            "libraries": libs,
            "preloads": [preload_record(p, site) for p in seen], "processes": processes}


def scrub(text: str, site: str, venv: str, driver: str) -> str:
    """An error message without this machine's paths."""
    for path, said in ((site + "/", ""), (driver, "driver"), (os.path.realpath(venv), "VENV"), (venv, "VENV")):
        text = text.replace(path, said)
    return text


def distributions(site: str) -> list[str]:
    return sorted(d[:-len(".dist-info")] for d in os.listdir(site) if d.endswith(".dist-info"))


def differences(truth: dict, said: dict, skipped=()) -> list[str]:
    """Where the model's answer is not the real loader's, in words. A module
    the real process could not load (`skipped`) is judged by neither."""
    out = []
    skipped = set(skipped)
    for name in sorted(set(truth["cuda"]) | set(said["cuda"])):
        a, b = truth["cuda"].get(name), said["cuda"].get(name)
        if b is None and a and set(a) <= set(said.get("opened", {}).get(name, ())):
            continue  # a dlopen at run time the model resolves to that very file
        if a != b:
            out.append(f"{name}: the loader maps {a}, the model {b}")
    if truth.get("gpu") != said.get("gpu"):
        out.append(f"GPU initialisation: the loader's registers a GPU: {truth.get('gpu')}, the model's: {said.get('gpu')}")
    for f in sorted(set(map(tuple, truth["failed"])) ^ set(map(tuple, said["failed"]))):
        if f[0] in skipped:
            continue
        who = "the loader" if list(f) in [list(x) for x in truth["failed"]] else "the model"
        out.append(f"{f[0]}: only {who} fails it ({f[1]})")
    return out


def write(data: dict, out: str) -> None:
    """One library or process per line: small diffs when re-recorded."""
    with open(out, "w") as f:
        f.write("{\n")
        items = list(data.items())
        for i, (key, value) in enumerate(items):
            end = ",\n" if i < len(items) - 1 else "\n"
            if isinstance(value, dict) and key == "libraries":
                body = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
                f.write(f'"{key}": {{\n{body}\n}}{end}')
            elif isinstance(value, list) and value and isinstance(value[0], dict):
                body = ",\n".join(f"  {json.dumps(v)}" for v in value)
                f.write(f'"{key}": [\n{body}\n]{end}')
            else:
                f.write(f"{json.dumps(key)}: {json.dumps(value)}{end}")
        f.write("}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("venv")
    ap.add_argument("out")
    ap.add_argument("--order", action="append", default=[], help="an import order of the union (a,b)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        driver = standin(os.path.join(tmp, "driver"))
        data = record(os.path.abspath(args.venv), [tuple(o.split(",")) for o in args.order], driver)
    write(data, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
