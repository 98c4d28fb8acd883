"""Inspect sources: the outputs each one fills, with file counts and bytes."""

from __future__ import annotations

from dataclasses import dataclass, field

from .archive import Source, identify, members
from .layout import OUTPUTS, output_of


@dataclass
class Inspection:
    source: Source
    files: dict[str, int] = field(default_factory=dict)  # output -> files
    bytes: dict[str, int] = field(default_factory=dict)  # output -> bytes

    @property
    def outputs(self) -> list[str]:
        return [o for o in OUTPUTS if self.files.get(o)]

    def to_json(self) -> dict:
        s = self.source
        return {"source": s.path, "kind": s.kind, "package": s.package, "version": s.version,
                "platform": s.platform, "outputs": self.outputs,
                "files": {o: self.files[o] for o in self.outputs},
                "bytes": {o: self.bytes.get(o, 0) for o in self.outputs},
                "out": {"files": self.files.get("out", 0), "bytes": self.bytes.get("out", 0)}}


def inspect(path: str) -> Inspection:
    result = Inspection(identify(path))
    for m in members(result.source):
        output = output_of(m.path, m.kind, m.executable)
        if m.kind == "dir":
            continue
        key = output or "out"
        result.files[key] = result.files.get(key, 0) + 1
        result.bytes[key] = result.bytes.get(key, 0) + m.size
    return result
