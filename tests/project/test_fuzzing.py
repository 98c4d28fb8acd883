"""The fuzzing campaign's short run (tests/fuzz/): every parser, under
hypothesis with inputs shaped like its format and mutated byte by byte, plus
a quick seeded run of the campaign's own engine, and every input that ever
crashed one. A parser answers or raises its own one-line error; nothing else.
The long run is `python3 tests/fuzz/run.py` (docs/engineering/fuzzing.md)."""

from __future__ import annotations

import io
import json
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz import run as campaign
from fuzz.targets import TARGETS, container

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
REGRESSIONS = Path(__file__).resolve().parents[1] / "fuzz" / "regressions"


@st.composite
def mutated(draw, target: str):
    """A seed of the target with a few byte-level edits hypothesis can shrink."""
    seeds = TARGETS[target].seeds()
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 6))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.integers(0, 3))
        if op == 0:
            data[at] = draw(st.integers(0, 255))
        elif op == 1:
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif op == 2:
            del data[at:at + draw(st.integers(1, 64))]
        else:
            width = draw(st.sampled_from([2, 4, 8]))
            data[at:at + width] = draw(st.sampled_from(campaign.INTERESTING)).to_bytes(16, "little")[:width]
    return bytes(data)


def check(target: str, data: bytes) -> None:
    TARGETS[target].run(data)


@pytest.mark.parametrize("target", sorted(TARGETS))
@SETTINGS
@given(data=st.data())
def test_mutated_seeds(target, data):
    check(target, data.draw(mutated(target)))


@pytest.mark.parametrize("target", sorted(TARGETS))
@SETTINGS
@given(blob=st.binary(max_size=2048))
def test_random_bytes(target, blob):
    check(target, blob)


# -- inputs shaped like each format ------------------------------------------------

scalars = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12),
                                                                                                  inner, max_size=4),
                           max_leaves=20)
store_paths = st.sampled_from(["/nix/store/" + "a" * 32 + "-torch-2.9.0", "/nix/store/" + "b" * 32 + "-magma",
                               "b" * 32 + "-magma", "", "/elsewhere/x", "relative"])


@SETTINGS
@given(entries=st.dictionaries(store_paths, st.fixed_dictionaries({}, optional={
    "narSize": json_values | st.integers(-5, 10**12), "references": st.lists(store_paths | json_values, max_size=4),
    "closureSize": json_values, "storeDir": json_values, "path": store_paths | json_values}), max_size=4),
       as_list=st.booleans())
def test_path_info_json(entries, as_list):
    data = [dict(v, path=k) for k, v in entries.items()] if as_list else entries
    check("path-info", json.dumps(data).encode())


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


toml_scalars = st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=30) | st.sampled_from(
    ["5 GiB", "5%", "-3%", "200MiB", "error", "off", "warning", "/abs", "rel", "*/tests/*", "8.6", "closure-audit-policy/1"])
toml_values = st.recursive(toml_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


def toml_text(tables: dict) -> bytes:
    lines = []
    for table, keys in tables.items():
        if isinstance(keys, dict):
            lines.append(f"[{json.dumps(table)}]")
            lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in keys.items()]
        else:
            lines.insert(0, f"{json.dumps(table)} = {toml_value(keys)}")
    return "\n".join(lines).encode()


policy_tables = st.dictionaries(
    st.sampled_from(["schema", "severity", "driver", "host", "loader", "ignore", "forbidden", "gpu", "other"]),
    st.dictionaries(st.sampled_from(["directories", "libraries", "allowed-libraries", "lib", "platform", "paths",
                                     "defaults", "patterns", "allow", "capabilities", "forward-compat",
                                     "invalid-elf", "forbidden-path", "x"]), toml_values, max_size=4) | toml_scalars,
    max_size=5)


@SETTINGS
@given(tables=policy_tables)
def test_policy_toml(tables):
    check("policy", toml_text(tables))


budget_keys = st.sampled_from(["installable", "path", "path-info", "max-closure-size", "max-growth", "baseline",
                               "max-added-size", "forbidden", "allow", "other"])


@SETTINGS
@given(defaults=st.dictionaries(budget_keys, toml_values, max_size=4),
       targets=st.dictionaries(st.text(max_size=8), st.dictionaries(budget_keys, toml_values, max_size=5) | toml_values,
                               max_size=3),
       schema=st.none() | toml_scalars)
def test_budgets_toml(defaults, targets, schema):
    text = toml_text({"defaults": defaults})
    text += b"\n" + b"\n".join(toml_text({f"targets.{json.dumps(k)}": v} if isinstance(v, dict) else
                                         {f"targets.{json.dumps(k)}": {"x": v}}).replace(
        f'["targets.{json.dumps(k)}"]'.encode(), f"[targets.{json.dumps(k)}]".encode()) for k, v in targets.items())
    if schema is not None:
        text = f"schema = {toml_value(schema)}\n".encode() + text
    check("budgets", text)


archives = st.fixed_dictionaries({}, optional={"relative_path": json_values | st.text(max_size=20),
                                               "sha256": json_values | st.text(max_size=64)})


@SETTINGS
@given(packages=st.dictionaries(st.text(max_size=12), st.fixed_dictionaries({}, optional={
    "version": json_values | st.text(max_size=8), "linux-x86_64": archives | json_values,
    "linux-sbsa": st.dictionaries(st.sampled_from(["cuda12", "cuda13"]), archives | json_values, max_size=2),
    "linux-aarch64": archives}) | json_values, max_size=4))
def test_redist_manifest_json(packages):
    check("redist-manifest", json.dumps(packages).encode())


member_names = st.sampled_from(["nvidia/cu13/lib/libx.so.1", "torch/lib/liba.so", "../../etc/x.so", "/abs/x.so",
                                "a\\b.so", "dir/", "nvidia/cu13/lib/", ".", "", "x/./y/../z.so", "ü/ß.so"]) | st.text(
    max_size=20)
contents = st.sampled_from(TARGETS["elf"].seeds()[:2] + [b"", b"\x7fELF", b"text\n"]) | st.binary(max_size=200)


@pytest.mark.filterwarnings("ignore:Duplicate name")
@SETTINGS
@given(members=st.lists(st.tuples(member_names, contents, st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]),
                                  st.integers(0, 0xFFFF)), max_size=5),
       damage=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3))
def test_wheel_members(members, damage):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, compression, mode in members:
            info = zipfile.ZipInfo(name or "empty")
            info.compress_type, info.external_attr = compression, mode << 16
            z.writestr(info, data)
    raw = bytearray(buf.getvalue())
    for at, value in damage:
        if raw:
            raw[at % len(raw)] = value
    check("wheel", bytes(raw))


@SETTINGS
@given(members=st.lists(st.tuples(member_names, st.sampled_from(["file", "dir", "sym", "hard", "fifo"]),
                                  st.binary(max_size=64), member_names), max_size=6),
       compression=st.sampled_from(["w", "w:gz", "w:xz", "w:bz2"]))
def test_tar_members(members, compression):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=compression) as tf:
        for name, kind, data, link in members:
            info = tarfile.TarInfo("libx-linux-x86_64-1.0-archive/" + name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE,
                         "hard": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            info.linkname = link if kind in ("sym", "hard") else ""
            info.size = len(data) if kind == "file" else 0
            tf.addfile(info, io.BytesIO(data) if kind == "file" else None)
    check("tar", buf.getvalue())


@SETTINGS
@given(entries=st.lists(st.tuples(st.integers(0, 10), st.integers(0, 2000), st.integers(0, 2**64 - 1),
                                  st.binary(max_size=64)), max_size=4),
       header=st.tuples(st.integers(0, 3), st.integers(0, 64)), cut=st.integers(0, 400), pad=st.binary(max_size=24))
def test_fat_binaries(entries, header, cut, pad):
    data = bytearray(container(entries))
    struct.pack_into("<HH", data, 4, *header) if header != (0, 0) else None
    check("fat-binary", bytes(data[:len(data) - cut % (len(data) + 1)]) + pad + bytes(container(entries)))


# -- the campaign's engine, briefly, and every input that ever crashed a parser ------

@pytest.mark.parametrize("target", sorted(TARGETS))
def test_campaign_short_run(target):
    result = campaign.run_random(target, inputs=400, seed=13, timeout=10, save_failures=False)
    assert (result["crashes"], result["hangs"]) == (0, 0), result


@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("*.bin")), ids=lambda p: p.name)
def test_regressions(path):
    target = next(t for t in sorted(TARGETS, key=len, reverse=True) if path.name.startswith(t + "-"))
    check(target, path.read_bytes())


def test_there_are_regressions():
    """Crashes the campaign found are kept as inputs (one per parser that had one)."""
    names = {p.name.rsplit("-", 1)[0] for p in REGRESSIONS.glob("*.bin")}
    assert {"policy", "budgets", "wheel"} <= names
