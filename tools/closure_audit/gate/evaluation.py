"""An evaluation's jobs, read for `survey` (docs/commands/survey.md): the JSON
lines nix-eval-jobs prints, or `nix eval --json` of an attribute set of store
paths.

Nothing in the input stops the read: a line that is not JSON (cut short, or
anything else), a job without outputs, a job that failed to evaluate, an
attribute listed twice, each becomes a job that carries its problem, named
by its attribute (or its line when it has none). The survey lists such a job
as not judged; every other job is read as usual.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import ClosureError
from ..nix.storepath import is_store_basename

CACHE_STATUSES = ("local", "cached", "notBuilt")


@dataclass
class Job:
    attr: str
    name: str | None = None
    system: str | None = None
    drv_path: str | None = None
    outputs: dict[str, str] = field(default_factory=dict)  # output name -> store path
    cache_status: str | None = None  # nix-eval-jobs --check-cache-status: local, cached, notBuilt
    problem: str | None = None  # why the job cannot be judged; None when it can
    line: int | None = None  # where the input has it (JSON lines)

    @property
    def roots(self) -> list[str]:
        return sorted(set(self.outputs.values()))


def read_evaluation(data: bytes, source: str) -> list[Job]:
    """The jobs of `data`, in the input's order. Raises ClosureError only when
    the input as a whole is neither format (empty, not text)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ClosureError(f"{source}: not text (an evaluation is nix-eval-jobs' JSON lines or "
                           f"`nix eval --json` of store paths)") from None
    if not text.strip():
        raise ClosureError(f"{source} is empty: no jobs to survey")
    whole = _whole_document(text)
    if whole is not None:
        jobs = _from_attribute_set(whole)
        if not jobs:  # `nix eval --json` of an empty set: a gate that judged nothing must not pass
            raise ClosureError(f"{source} names no job: no store paths to survey")
        return _mark_duplicates(jobs)
    return _mark_duplicates([_from_line(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()])


def _whole_document(text: str) -> dict | None:
    """`nix eval --json` output: one object, of store paths or objects of
    them, that is not a line of nix-eval-jobs (which always has `attr`)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or isinstance(value.get("attr"), str):
        return None
    return value


def _from_attribute_set(value: dict, prefix: str = "") -> list[Job]:
    jobs = []
    for key, item in value.items():
        attr = f"{prefix}{_component(key)}"
        if isinstance(item, dict):
            jobs.extend(_from_attribute_set(item, attr + "."))
        elif isinstance(item, str):
            job = Job(attr, outputs={"out": item})
            job.problem = _output_problem("out", item)
            if job.problem is None:
                job.name = item.rpartition("/")[2][33:]
            jobs.append(job)
        else:
            jobs.append(Job(attr, problem=f"not a store path but {_kind(item)}"))
    return jobs


def _component(key: str) -> str:
    # As nix-eval-jobs writes `attr`: a component holding a dot is quoted.
    return json.dumps(key) if "." in key else key


def _from_line(n: int, line: str) -> Job:
    where = f"line {n}"
    try:
        value = json.loads(line)
    except RecursionError:
        return Job(where, problem=f"{where}: JSON nested too deeply", line=n)
    except ValueError as exc:
        cut = "cut short" if line.lstrip().startswith("{") and not line.rstrip().endswith("}") else "not JSON"
        return Job(where, problem=f"{where}: {cut} ({exc})", line=n)
    if not isinstance(value, dict):
        return Job(where, problem=f"{where}: not a job but {_kind(value)}", line=n)
    attr = value.get("attr")
    if not isinstance(attr, str) or not attr:
        path = value.get("attrPath")
        if isinstance(path, list) and path and all(isinstance(p, str) for p in path):
            attr = ".".join(map(_component, path))
        else:
            return Job(where, problem=f"{where}: a job without `attr`", line=n)
    job = Job(attr, line=n)
    job.name = value.get("name") if isinstance(value.get("name"), str) else None
    job.system = value.get("system") if isinstance(value.get("system"), str) else None
    job.drv_path = value.get("drvPath") if isinstance(value.get("drvPath"), str) else None
    status = value.get("cacheStatus")
    if status in CACHE_STATUSES:
        job.cache_status = status
    elif isinstance(value.get("isCached"), bool):  # before nix-eval-jobs 2.22.1
        job.cache_status = "cached" if value["isCached"] else "notBuilt"
    error = value.get("error")
    if error is not None:
        # Nix's messages end with the line that says what went wrong; its `error:` prefix is said here.
        last = str(error).strip().splitlines()
        job.problem = "failed to evaluate: " + (last[-1].strip().removeprefix("error:").strip() if last
                                                else "(no message)")
        return job
    outputs = value.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        job.problem = "only a drvPath, no outputs" if job.drv_path else "no outputs"
        return job
    for name, path in sorted(outputs.items()):
        problem = _output_problem(name, path)
        if problem is not None:
            job.problem = problem
            return job
        job.outputs[name] = path
    return job


def _output_problem(name: str, path) -> str | None:
    if path is None:
        return f"output {name} has no store path at evaluation (content-addressed)"
    if not isinstance(path, str):
        return f"output {name} is {_kind(path)}, not a store path"
    head, _, base = path.rpartition("/")
    if not head.startswith("/") or not is_store_basename(base):
        return f"output {name} is not a store path: {path[:200]!r}"
    return None


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _mark_duplicates(jobs: list[Job]) -> list[Job]:
    """An attribute listed twice: the later entries are not judged, and the
    first is not either when they disagree on the outputs (which one the
    evaluation meant is unknown)."""
    first: dict[str, Job] = {}
    for job in jobs:
        earlier = first.get(job.attr)
        if earlier is None:
            first[job.attr] = job
            continue
        at = f" (line {earlier.line})" if earlier.line is not None else ""
        job.problem = f"duplicate attribute: listed before{at}"
        if job.outputs != earlier.outputs and earlier.problem is None:
            earlier.problem = "duplicate attribute with other outputs" + (
                f" on line {job.line}" if job.line is not None else "")
        job.attr = f"{job.attr} (line {job.line})" if job.line is not None else f"{job.attr} (again)"
    return jobs
