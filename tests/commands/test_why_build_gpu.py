"""`why-build --gpu` on real fat binaries: nvcc compiles one tiny kernel for
each case once per module, each lands in a derivation of its own (a
candidate), the candidates are built, copied to a `file://` cache with NAR
listings, served over http on the loopback, and deleted from the local
store, so their GPU code is read from the cache's NARs. Every verdict is
checked against `cuobjdump --list-elf --list-ptx` on the same file (its
`.version` from `--dump-ptx`), with NVIDIA's rules written out here, and
against `archs` on the same file.

Needs Nix, nvcc (tests/support/cudagen.py finds it) and cuobjdump
(cudagen.find_cuobjdump: $NIXCUDA_CUOBJDUMP, PATH, or NVIDIA's wheel, which
ci/setup installs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid

import pytest

from cacheserver import CacheServer
from conftest import fails_closed, run_cli
from cudagen import KERNEL, Nvcc, find_cuobjdump, find_nvcc, gencode
from nixstore import NIX_FLAGS, needs_nix
from parts import needs

NVCC, CUOBJDUMP = find_nvcc(), find_cuobjdump()
pytestmark = [needs_nix, needs("nvcc (ci/setup installs NVIDIA's compiler wheels)", NVCC is not None),
              needs("cuobjdump (ci/setup installs NVIDIA's nvidia-cuda-cuobjdump wheel)", CUOBJDUMP is not None)]

# candidate -> (file in lib/, how it is made, the capabilities its derivation requests)
CASES = {
    "sm89": ("libk.so", gencode("89:sm_89"), {"cudaCapabilities": "8.9"}),
    "ptx90": ("libk.so", gencode("90:compute_90"), {"CMAKE_CUDA_ARCHITECTURES": "90-virtual"}),
    "sm75": ("libk.so", gencode("75:sm_75"), {"cudaCapabilities": "7.5"}),
    "sm100a": ("libk.so", gencode("100a:sm_100a"), {"cudaCapabilities": "10.0a"}),
    "isanew": ("libk.so", gencode("80:compute_80"), {}),  # PTX as nvcc 13.0 writes it: .version 9.0
    "isaold": ("libk.so", None, {}),  # the same PTX with .version 8.0, embedded by nvcc -fatbin
    "cudart13": ("libk.so", gencode("89:sm_89"), {}),  # beside a libcudart.so.13
    "missing": ("libk.so", gencode("89:sm_89"), {}),  # its NAR is deleted from the cache
    "local": ("libk.so", gencode("89:sm_89"), {}),  # valid in the local store, never copied to the cache
}
GPUS = ["8.6", "8.9", "9.0", "10.0", "10.3", "12.0"]


def expr(tag: str, files: dict[str, str]) -> str:
    def drv(name, body, env):
        extra = "".join(f' {k} = "{v}";' for k, v in env.items())
        return (f'  {name} = builtins.derivation {{ name = "{name}-{tag}"; inherit system; builder = "/bin/sh";'
                f' PATH = "/usr/local/bin:/usr/bin:/bin";{extra} args = [ "-ec" \'\'\n{body}\n\'\' ]; }};\n')
    out = "let\n  system = builtins.currentSystem;\n"
    # A large path without GPU code (no file that could be loaded), in sm89's closure.
    out += drv("bigdata", "mkdir -p $out/share; head -c 6000000 /dev/urandom > $out/share/weights.bin", {})
    for name, (lib, _, env) in CASES.items():
        src = f'builtins.path {{ path = {files[name]}; name = "{name}-src"; }}'
        body = f"mkdir -p $out/lib; cp ${{{src}}} $out/lib/{lib}"
        if name == "sm89":
            body += "; echo ${bigdata} > $out/lib/data-path"
        if name == "cudart13":
            body += f"; cp ${{builtins.path {{ path = {files['runtime']}; name = \"rt-src\"; }}}} $out/lib/libcudart.so.13"
        out += drv(name, body, env)
    out += drv("narrow", "mkdir -p $out", {"cudaCapabilities": "8.9"})
    return out + "in { inherit " + " ".join([*CASES, "narrow", "bigdata"]) + "; }\n"


def old_isa(nvcc: Nvcc, work) -> str:
    """compute_80 PTX whose .version says 8.0 (what CUDA 12.0 writes), in a
    shared object's .nv_fatbin section, as nvcc places it."""
    subprocess.run([nvcc.nvcc, "-ptx", "-arch=compute_80", "-o", "k80.ptx", "k.cu"], cwd=work, check=True)
    ptx = (work / "k80.ptx").read_text()
    (work / "k80.ptx").write_text(re.sub(r"^\.version .*$", ".version 8.0", ptx, flags=re.M))
    subprocess.run([nvcc.nvcc, "-fatbin", *gencode("80:compute_80"), "-o", "k80.fatbin", "k80.ptx"], cwd=work,
                   check=True)
    (work / "host.c").write_text("int host_side(int a) { return a + 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", "host.so", "host.c"], cwd=work, check=True)
    subprocess.run(["objcopy", "--add-section", ".nv_fatbin=k80.fatbin", "--set-section-flags",
                    ".nv_fatbin=alloc,readonly,data", "host.so", "isaold.so"], cwd=work, check=True,
                   capture_output=True)
    return str(work / "isaold.so")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    work = tmp_path_factory.mktemp("gpuplan")
    tag = "gp" + uuid.uuid4().hex[:8]
    nvcc = Nvcc(NVCC, work)
    recipes = {f"{n}.so": (flags,) for n, (_, flags, _) in CASES.items() if flags is not None and n != "missing"}
    files = {n[:-3]: str(p) for n, p in nvcc.build_all(recipes).items()}
    files["missing"] = files["local"] = files["sm89"]
    files["isaold"] = old_isa(nvcc, work)
    (work / "rt.c").write_text("int cudaRuntimeGetVersion(int *v) { *v = 13000; return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudart.so.13", "-o", "rt.so", "rt.c"], cwd=work,
                   check=True)
    files["runtime"] = str(work / "rt.so")
    (work / "c.nix").write_text(expr(tag, files))
    drvs = {}
    for name in [*CASES, "narrow", "bigdata"]:
        drvs[name] = subprocess.run(["nix-instantiate", str(work / "c.nix"), "-A", name], capture_output=True,
                                    text=True, check=True).stdout.strip()
    cached = [n for n in [*CASES, "bigdata"] if n != "local"]
    built = subprocess.run(["nix-build", *[drvs[n] for n in cached], "--no-out-link", "--option",
                            "substituters", ""], capture_output=True, text=True, check=True).stdout.split()
    cache = work / "cache"
    subprocess.run(["nix", *NIX_FLAGS, "copy", "--to", f"file://{cache}?compression=xz&write-nar-listing=true",
                    *built], check=True, capture_output=True)
    closure = subprocess.run(["nix-store", "--query", "--requisites", *built], capture_output=True, text=True,
                             check=True).stdout.split()
    subprocess.run(["nix-store", "--delete", *closure], check=True, capture_output=True)
    outs = {n: subprocess.run(["nix-store", "--query", "--outputs", d], capture_output=True, text=True,
                              check=True).stdout.strip() for n, d in drvs.items()}
    (cache / narinfo_field(cache, outs["missing"], "URL")).unlink()
    local = subprocess.run(["nix-build", drvs["local"], "--no-out-link", "--option", "substituters", ""],
                           capture_output=True, text=True, check=True).stdout.split()
    try:
        with CacheServer(str(cache)) as server:
            yield {"drvs": drvs, "outs": outs, "files": files, "cache": cache, "server": server, "work": work}
    finally:
        subprocess.run(["nix-store", "--delete", *local], capture_output=True)


def narinfo_field(cache, path: str, key: str) -> str:
    text = (cache / f"{os.path.basename(path)[:32]}.narinfo").read_text()
    return dict(line.split(": ", 1) for line in text.splitlines())[key]


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def plan(world, likes, *extra):
    args = ["why-build", world["drvs"]["narrow"], "--store", world["server"].url, "--json"]
    for name in likes:
        args += ["--like", world["drvs"][name]]
    p = run_cli(*args, *extra)
    assert "Traceback" not in p.stderr and p.returncode in (0, 1), p.stderr
    return p.returncode, json.loads(p.stdout)["gpu"]


def cuobjdump_codes(path: str) -> tuple[set[str], dict[str, tuple[int, int]]]:
    """NVIDIA's listing: the cubins and PTX a file holds (sm_89, compute_90),
    and each PTX's .version."""
    listed = subprocess.run([CUOBJDUMP, "--list-elf", "--list-ptx", path], capture_output=True, text=True).stdout
    codes = set()
    for kind, arch in re.findall(r"^(ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(?:cubin|ptx)$", listed, re.M):
        codes.add(arch if kind == "ELF" else arch.replace("sm_", "compute_"))
    dumped = subprocess.run([CUOBJDUMP, "--dump-ptx", path], capture_output=True, text=True).stdout
    versions = {}
    for arch, major, minor in re.findall(r"arch = (sm_\d+[af]?).*?^\.version (\d+)\.(\d+)", dumped, re.M | re.S):
        versions[arch.replace("sm_", "compute_")] = (int(major), int(minor))
    return codes, versions


def nvidia_rules(codes: set[str], versions: dict, gpu: str, isa: tuple[int, int] | None) -> str:
    """NVIDIA's rules written out on cuobjdump's listing: a cubin runs on the
    same major at the same or a higher minor (an `a` cubin on its own
    capability only); PTX on any capability at or above its own, when the
    driver compiles its ISA version."""
    major, minor = (int(x) for x in gpu.split("."))
    for c in codes:
        m = re.fullmatch(r"(sm|compute)_(\d+)(\d)(a?)", c)
        cm, cn, a = int(m[2]), int(m[3]), m[4]
        if m[1] == "sm" and cm == major and (cn == minor if a else cn <= minor):
            return "native"
    for c in codes:
        m = re.fullmatch(r"(sm|compute)_(\d+)(\d)(a?)", c)
        cm, cn, a = int(m[2]), int(m[3]), m[4]
        if m[1] == "compute" and ((cm, cn) == (major, minor) if a else (cm, cn) <= (major, minor)) \
                and (isa is None or versions[c] <= isa):
            return "jit"
    return "none"


def archs_judgement(path: str, gpu: str) -> str:
    """What `archs --capabilities GPU` says of the same file."""
    p = run_cli("archs", path, "--capabilities", gpu, "--json")
    rules = {f["rule"] for f in json.loads(p.stdout)["findings"]}
    return "none" if "missing-gpu-arch" in rules else "jit" if "jit-only-gpu-arch" in rules else "native"


def per_file(candidate: dict, gpu: str) -> str:
    verdict = next(v for v in candidate["gpus"] if v["gpu"] == gpu)
    hows = {f["how"] for f in verdict["files"]}
    return "none" if "none" in hows else "jit" if "jit" in hows else "native"


def by_name(result, world) -> dict:
    names = {d: n for n, d in world["drvs"].items()}
    return {names[c["drv"]]: c for c in result["candidates"]}


EXPECTED = {  # the cases of the issue, per GPU
    "sm89": {"8.6": "does-not-run", "8.9": "native", "9.0": "does-not-run"},
    "ptx90": {"8.9": "does-not-run", "9.0": "jit", "12.0": "jit"},
    "sm75": {"8.9": "does-not-run"},
    "sm100a": {"10.0": "native", "10.3": "does-not-run"},
}


def test_verdicts_agree_with_cuobjdump_and_archs(world, tmp_path):
    rc, result = plan(world, ["sm89", "ptx90", "sm75", "sm100a", "missing"], "--gpu", ",".join(GPUS))
    assert rc == 1  # nothing runs on every GPU named
    assert result["gpus"] == GPUS and result["driver"] is None
    got = by_name(result, world)
    for name, gpus in EXPECTED.items():
        for gpu, verdict in gpus.items():
            assert next(v for v in got[name]["gpus"] if v["gpu"] == gpu)["verdict"] == verdict, (name, gpu)
    for name in EXPECTED:
        path = world["files"][name]
        codes, versions = cuobjdump_codes(path)
        assert got[name]["gpu_files"] == 1
        for gpu in GPUS:
            rule = nvidia_rules(codes, versions, gpu, None)
            assert per_file(got[name], gpu) == rule == archs_judgement(path, gpu), (name, gpu, codes)
            for f in next(v for v in got[name]["gpus"] if v["gpu"] == gpu)["files"]:
                assert f["file"] == f"{world['outs'][name]}/lib/libk.so"
                assert set(f["carries"]) == codes
    # No NAR: unknown on every GPU, naming the path, never "runs".
    assert {v["verdict"] for v in got["missing"]["gpus"]} == {"unknown"}
    assert world["outs"]["missing"] in got["missing"]["gpus"][0]["why"][0]
    # JIT's cost: the PTX as the driver compiles it, as cuobjdump extracts it.
    jit = next(v for v in got["ptx90"]["gpus"] if v["gpu"] == "9.0")
    out = tmp_path / "xptx"
    out.mkdir()
    subprocess.run([CUOBJDUMP, "-xptx", "all", world["files"]["ptx90"]], cwd=out, check=True, capture_output=True)
    [ptx] = out.iterdir()
    assert jit["jit_bytes"] == jit["files"][0]["jit_bytes"] > 0
    # The payload is the text with its NUL terminator, padded to 8 bytes.
    assert 0 < jit["jit_bytes"] - ptx.stat().st_size <= 8, (jit["jit_bytes"], ptx.stat().st_size)
    # The target, not built, judged from what it requests (8.9); ranking: what runs, nothing to build, first.
    target = result["candidates"][[c["role"] for c in result["candidates"]].index("target")]
    assert target["judged_from"] == "request" and target["build"] == 1
    assert {v["gpu"]: v["verdict"] for v in target["gpus"]}["8.9"] == "native"


def test_ptx_isa_against_the_driver(world):
    for name in ("isanew", "isaold"):
        _, versions = cuobjdump_codes(world["files"][name])
        assert versions == {"compute_80": (9, 0) if name == "isanew" else (8, 0)}
    rc, result = plan(world, ["isanew", "isaold"], "--gpu", "8.9", "--driver", "12.8")
    assert result["driver"] == "12.8" and result["ptx_isa"] == "8.7"
    got = by_name(result, world)
    assert got["isanew"]["verdict"] == "does-not-run"
    assert got["isaold"]["verdict"] == "jit"
    assert rc == 0  # isaold runs on every GPU named, nothing to build
    assert result["candidates"][0]["drv"] == world["drvs"]["isaold"]
    assert result["best"]["drv"] == world["drvs"]["isaold"]
    for name in ("isanew", "isaold"):
        codes, versions = cuobjdump_codes(world["files"][name])
        assert per_file(got[name], "8.9") == nvidia_rules(codes, versions, "8.9", (8, 7))
    # A current driver compiles both; a driver given by its own version is read as its CUDA release.
    _, current = plan(world, ["isanew"], "--gpu", "8.9")
    assert by_name(current, world)["isanew"]["verdict"] == "jit"
    _, own = plan(world, ["isanew"], "--gpu", "8.9", "--driver", "570.26")
    assert own["driver"] == "12.8" and by_name(own, world)["isanew"]["verdict"] == "does-not-run"


def test_runtime_major_against_the_driver(world):
    _, old = plan(world, ["cudart13"], "--gpu", "8.9", "--driver", "12.8")
    c = by_name(old, world)["cudart13"]
    assert c["runtimes"] == [13] and c["verdict"] == "does-not-run"
    assert "libcudart.so.13" in c["gpus"][0]["why"][0]
    rc, new = plan(world, ["cudart13"], "--gpu", "8.9", "--driver", "13.0")
    assert by_name(new, world)["cudart13"]["verdict"] == "native" and rc == 0


def test_large_path_without_gpu_code_is_not_downloaded(world):
    server = world["server"]
    server.reset()
    rc, result = plan(world, ["sm89"], "--gpu", "8.9")
    assert rc == 0
    c = by_name(result, world)["sm89"]
    assert c["verdict"] == "native" and c["nars_not_read"] == 1
    big, small = world["outs"]["bigdata"], world["outs"]["sm89"]
    assert server.requests[f"{os.path.basename(big)[:32]}.ls"] == 1
    assert server.requests[narinfo_field(world["cache"], big, "URL")] == 0
    assert server.requests[narinfo_field(world["cache"], small, "URL")] == 1
    assert c["nar_bytes_read"] == int(narinfo_field(world["cache"], small, "NarSize"))
    # The configuration of the best: what sm89's derivation requests.
    assert result["best"]["configuration"]["nix"] == 'cudaCapabilities = [ "8.9" ]; cudaForwardCompat = false;'


def test_valid_in_the_local_store_is_read_there(world):
    server = world["server"]
    server.reset()
    rc, result = plan(world, ["local"], "--gpu", "8.9,9.0")
    c = by_name(result, world)["local"]
    assert c["build"] == c["fetch"] == 0 and c["gpu_files"] == 1 and c["nar_bytes_read"] == 0
    assert {v["gpu"]: v["verdict"] for v in c["gpus"]} == {"8.9": "native", "9.0": "does-not-run"}
    assert c["gpus"][1]["files"][0]["file"] == f"{world['outs']['local']}/lib/libk.so"
    assert not [r for r in server.requests if r.startswith("nar/") or r.endswith(".ls")]
    assert rc == 1


def test_terminal_and_markdown(world, tmp_path):
    p = run_cli("why-build", world["drvs"]["narrow"], "--store", world["server"].url, "--like",
                world["drvs"]["ptx90"], "--like", world["drvs"]["sm75"], "--gpu", "9.0",
                "--markdown", str(tmp_path / "s.md"), env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    assert "runs after JIT" in p.stdout and "does not run" in p.stdout
    assert 'cudaCapabilities = [ "9.0" ]; cudaForwardCompat = true;' in p.stdout
    md = (tmp_path / "s.md").read_text()
    assert "### on GPU 9.0, a current driver (assumed)" in md and "runs after JIT" in md


def test_bad_input(world):
    narrow = world["drvs"]["narrow"]
    fails_closed(["why-build", narrow, "--gpu", "8.9x"], "8.9x")
    fails_closed(["why-build", narrow, "--gpu", "8.9", "--driver", "thirteen"], "thirteen")
    fails_closed(["why-build", narrow, "--gpu", "8.9", "--like", str(world["work"] / "nope.nix")], "nope")
    fails_closed(["why-build", narrow, "--driver", "13.0"], "--gpu")
    # A cache that fails: the candidate is never judged to run.
    server = world["server"]
    server.reset()
    server.override = {narinfo_field(world["cache"], world["outs"]["sm89"], "URL"): 500}
    try:
        rc, result = plan(world, ["sm89"], "--gpu", "8.9", "--http-connections", "1")
    finally:
        server.reset()
    assert by_name(result, world)["sm89"]["verdict"] == "unknown" and rc == 1


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None or os.path.exists("/proc/driver/nvidia"),
                    reason="this machine has an NVIDIA GPU or driver")
def test_host_without_gpu_or_driver(world):
    fails_closed(["why-build", world["drvs"]["narrow"], "--gpu", "host"], "--gpu host", "no NVIDIA GPU")
    fails_closed(["why-build", world["drvs"]["narrow"], "--gpu", "8.9", "--driver", "host"], "--driver host")
