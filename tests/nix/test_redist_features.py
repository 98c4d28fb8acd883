"""redist-features: tarballs, wheels and directories; hostile archives; memory;
the manifest generator; and the same rules as the split hook."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
import zipfile

import pytest

import hookfile
import redist_fixture
from conftest import ROOT
from hookfile import split_hook  # noqa: F401 (a fixture)
from redist_features.layout import OUTPUTS, output_of, rules


def run_tool(*args, **kw):
    return subprocess.run([sys.executable, "-m", "redist_features", *args], capture_output=True, text=True,
                          timeout=kw.pop("timeout", 300), **kw)


EXPECTED_OUTPUTS = [o for o in OUTPUTS if o in set(redist_fixture.EXPECTED.values())]


@pytest.fixture
def demo(tmp_path, objects):
    top = redist_fixture.make_tree(tmp_path / "src", objects)
    return {"tree": top, "tarball": redist_fixture.pack(top, tmp_path),
            "wheel": redist_fixture.wheel(top, tmp_path), "dir": redist_fixture.unpacked(top, tmp_path)}


@pytest.mark.parametrize("kind", ["tarball", "wheel", "dir"])
def test_every_source_kind(demo, kind):
    p = run_tool(str(demo[kind]), "--json")
    assert p.returncode == 0, p.stderr
    (pkg,) = json.loads(p.stdout)["packages"]
    assert pkg["outputs"] == EXPECTED_OUTPUTS
    counts = {}
    for rel, out in redist_fixture.EXPECTED.items():
        counts[out or "out"] = counts.get(out or "out", 0) + 1
    assert pkg["files"] == {o: counts[o] for o in EXPECTED_OUTPUTS}
    assert pkg["out"]["files"] == counts["out"]
    if kind != "wheel":
        assert (pkg["package"], pkg["version"], pkg["platform"]) == ("libdemo", "13.0.1", "linux-x86_64")


def test_terminal_summary(demo):
    p = run_tool(str(demo["tarball"]))
    assert p.returncode == 0 and p.stdout.startswith("libdemo 13.0.1 [tarball]: bin (1), lib (2), static (1)")


def _hook_outputs(hook, cases) -> list[str]:
    """The output the hook gives each (path, kind, executable)."""
    script = f'source "{hook}"; while IFS=$\'\\t\' read -r p k x; do _redistOutputOf "$p" "$k" "$x"; ' \
             'printf "%s\\n" "$_redistTarget"; done'
    stdin = "".join(f"{p}\t{k}\t{int(x)}\n" for p, k, x in cases)
    got = subprocess.run(["bash", "-c", script], input=stdin, capture_output=True, text=True, check=True)
    return got.stdout.split("\n")[:-1]


def test_rules_agree_with_the_split_hook(demo, split_hook):
    """layout.py and hooks/split-redist-outputs.sh, both reading
    lib/data/redist-split-rules.txt, classify every path alike."""
    cases = [(rel, "link" if rel == "lib/libdemo.so" else "file", rel == "bin/demo-tool")
             for rel in redist_fixture.EXPECTED]
    cases += [(p, "file", x) for p, x in [
        ("lib64/libx.so.1", False), ("lib/x86_64-linux-gnu/liby.so", False), ("stubs/libz.so", False),
        ("extras/CUPTI/samples/a/b.cpp", False), ("bin/crt/link.stub", False), ("bin/nvcc", True),
        ("share/doc/x/README", False), ("docs/a.html", False), ("man/man1/x.1", False), ("pkg-config/a.pc", False),
        ("lib/libfoo.a", False), ("lib/stubs/libfoo.a", False), ("nvvm/lib64/libnvvm.so", False),
        ("src/a.cpp", False), ("stubs", False), ("doc", False), ("include/cub/cub.cuh", False),
        ("lib/cmake/x/y.txt", False), ("share/cmake/x.cmake", False), ("a b/c d.h", False),
    ]]
    bash = _hook_outputs(split_hook, cases)
    python = [output_of(p, k, x) or "out" for p, k, x in cases]
    assert bash == python
    assert dict(zip([c[0] for c in cases], python))["lib/stubs/libfoo.a"] == "stubs"


def test_the_hook_takes_its_rules_from_the_substitution(tmp_path):
    """The hook holds no rule of its own: a rule added to the text
    makeSetupHook substitutes reaches it, and a rule it cannot read fails
    the build's setup, naming the rule."""
    rules_text = hookfile.SPLIT_RULES.read_text()
    assert [r[0] for r in rules()] == [line.split()[0] for line in rules_text.splitlines()
                                       if line.strip() and not line.startswith("#")]
    template = hookfile.SPLIT_TEMPLATE.read_text()
    hook = tmp_path / "hook.sh"
    hook.write_text(template.replace("@redistSplitRules@", "samples name=*.ipynb\n" + rules_text))
    assert _hook_outputs(hook, [("a/demo.ipynb", "file", False), ("lib/libx.so", "file", False)]) == ["samples", "lib"]
    for bad, message in (("dev suffix=.h", "unknown test 'suffix' in the rule: dev suffix=.h"),
                         ("@redistSplitRules@", "a rule without a test: @redistSplitRules@")):  # not substituted
        hook.write_text(template.replace("@redistSplitRules@", bad))
        p = subprocess.run(["bash", "-c", f'source "{hook}"'], capture_output=True, text=True)
        assert p.returncode == 1 and p.stderr == f"split-redist-outputs: {message}\n"


def _tar(tmp_path, name: str, members: list[tarfile.TarInfo]) -> str:
    path = tmp_path / name
    with tarfile.open(path, "w:xz") as tf:
        for m in members:
            tf.addfile(m, io.BytesIO(b"x" * m.size) if m.isreg() else None)
    return str(path)


def _member(name, kind=tarfile.REGTYPE, link="", size=1):
    m = tarfile.TarInfo(name)
    m.type, m.linkname, m.size = kind, link, size if kind == tarfile.REGTYPE else 0
    return m


@pytest.mark.parametrize("members, message", [
    ([_member("../../etc/passwd")], "escapes the archive (path traversal)"),
    ([_member("x-archive/lib/../../../evil")], "escapes the archive (path traversal)"),
    ([_member("/etc/passwd")], "absolute member name"),
    ([_member("x-archive/lib/libx.so", tarfile.SYMTYPE, "/usr/lib/libc.so.6")], "points to the absolute path"),
    ([_member("x-archive/lib/libx.so", tarfile.SYMTYPE, "../../../etc/shadow")], "escapes the archive"),
    ([_member("x-archive/lib/libx.so", tarfile.LNKTYPE, "../etc/shadow")], "escapes the archive"),
])
def test_hostile_tarballs_are_refused(tmp_path, members, message):
    p = run_tool(_tar(tmp_path, "evil-archive.tar.xz", members))
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_hostile_wheel_is_refused(tmp_path):
    path = tmp_path / "nvidia_evil-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("nvidia/cu13/../../../../tmp/evil", "x")
    p = run_tool(str(path))
    assert p.returncode == 2 and "path traversal" in p.stderr


def test_unreadable_inputs(tmp_path):
    (tmp_path / "broken.tar.xz").write_bytes(b"\xfd7zXZ\x00" + b"garbage" * 10)
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    for name, message in (("broken.tar.xz", "cannot read"), ("broken.whl", "cannot read"),
                          ("missing.tar.xz", "not found")):
        p = run_tool(str(tmp_path / name))
        assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr, (name, p.stderr)
    assert run_tool().returncode == 2


def test_constant_memory_on_a_big_archive(tmp_path):
    """A tarball with 1 GiB of members is read in the memory a tiny one takes:
    members are streamed, never held."""
    def archive(name: str, members: int, size: int) -> str:
        path = tmp_path / name
        with tarfile.open(path, "w:xz", preset=0) as tf:
            zero = io.BytesIO()
            for i in range(members):
                info = tarfile.TarInfo(f"big-linux-x86_64-1.0-archive/lib/libbig{i}.so")
                info.size = size
                zero.seek(0)
                tf.addfile(info, _Zeros(size))
        return str(path)

    small, big = archive("small-archive.tar.xz", 4, 1 << 10), archive("big-archive.tar.xz", 64, 16 << 20)
    peaks = []
    for path in (small, big):
        code = ("import resource; from redist_features.inspect import inspect; "
                "r = inspect(%r); print(r.files['lib'], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)" % path)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        peaks.append(int(out[1]))
    assert int(out[0]) == 64
    assert peaks[1] < peaks[0] + 16 * 1024, peaks  # KiB: within 16 MiB of the tiny archive's peak


class _Zeros(io.RawIOBase):
    """A file of `size` zero bytes that holds none of them."""

    def __init__(self, size: int):
        self.left = size

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def test_manifest_generator(demo, tmp_path):
    """Archives named by the manifest (sha256 checked) win over wheels; what
    has neither is listed as not inspected."""
    tarball = demo["tarball"]
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    manifest = {
        "release_label": "13.0.9", "release_product": "cuda",
        "libdemo": {"name": "Demo", "version": "13.0.1",
                    "linux-x86_64": {"relative_path": f"libdemo/linux-x86_64/{tarball.name}", "sha256": digest},
                    "linux-sbsa": {"relative_path": "libdemo/linux-sbsa/libdemo-linux-sbsa-13.0.1-archive.tar.xz",
                                   "sha256": "0" * 64}},
        "libother": {"name": "Other", "version": "1.0",
                     "linux-x86_64": {"relative_path": "x/libother-linux-x86_64-1.0-archive.tar.xz",
                                      "sha256": "0" * 64}},
    }
    path = tmp_path / "redistrib_13.0.9.json"
    path.write_text(json.dumps(manifest))
    p = run_tool("manifest", str(path), str(tarball.parent))
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["schema"] == "nixcuda-redist-outputs/1" and data["release"] == "13.0.9"
    assert data["packages"] == {"libdemo": {"linux-x86_64": {"outputs": EXPECTED_OUTPUTS,
                                                             "inspected": f"tarball {tarball.name}"}}}
    assert data["not_inspected"] == {"libdemo": ["linux-sbsa"], "libother": ["linux-x86_64"]}
    manifest["libdemo"]["linux-x86_64"]["sha256"] = "1" * 64
    path.write_text(json.dumps(manifest))
    p = run_tool("manifest", str(path), str(tarball.parent))
    assert p.returncode == 2 and "sha256 differs" in p.stderr


def test_committed_output_lists_are_what_the_generator_writes():
    """pkgs/cuda/outputs: the generator's schema, packages of their manifest,
    outputs the rules know, and what was inspected."""
    for path in sorted((ROOT / "pkgs/cuda/outputs").glob("*.json")):
        data = json.loads(path.read_text())
        assert data["schema"] == "nixcuda-redist-outputs/1", path
        manifest = json.loads((ROOT / "pkgs/cuda/manifests" / f"redistrib_{data['release']}.json").read_text())
        for name, platforms in data["packages"].items():
            assert name in manifest, (path, name)
            for platform, entry in platforms.items():
                assert platform in manifest[name], (path, name, platform)
                assert set(entry["outputs"]) <= set(OUTPUTS) and entry["outputs"], (path, name)
                assert entry["inspected"].split()[0] in ("tarball", "directory", "wheel")


@pytest.mark.parametrize("content, message", [
    ("{}", "no packages"),
    ('{"release_label": "13.0.9", "release_product": "cuda"}', "no packages"),
    ("[]", "a JSON object of packages"),
    ('{"x": {"version": 3}}', "'x.version' must be a string"),
    ('{"x": {"version": "1", "linux-x86_64": {"relative_path": "a"}}}', "'x.linux-x86_64' must be an object"),
    ('{"x": {"version": "1", "linux-x86_64": []}}', "'x.linux-x86_64' must be an object"),
    ("{not json", "cannot read manifest"),
])
def test_manifest_that_names_nothing_usable_fails(tmp_path, content, message):
    path = tmp_path / "redistrib.json"
    path.write_text(content)
    p = run_tool("manifest", str(path), str(tmp_path))
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
