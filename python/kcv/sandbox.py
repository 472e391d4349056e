"""``kcv.verify()``: a KernelBench-style candidate judged in a sandboxed worker.

The candidate never runs in the caller's process. libkcv's ``PythonWorker`` (the same code that
serves ``kcv verify --reference`` and ``kcv audit``) starts ``python -m kcv.worker``, sends the
request, reads the events, and enforces a time limit on every stage: a stage that reports no
progress within the limit, or a worker that dies, fails the gate in progress with the signature
``hang`` or ``crash``, and a fresh worker carries on with the remaining gates. This module only
turns the caller's problem and candidate into files and the answer into a ``Record``.

A problem or candidate given as source text or as a module object is written to a private
temporary folder under a name derived from its SHA-256, and the record names it
``<source sha256:HEX>`` (the first 16 hex digits) wherever the worker wrote the file's path,
so that the same source, device and seed give the same record.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable, Union

from .record import Record

LOAD_TIMEOUT_S = 900.0

# What verify() accepts for the problem and the candidate.
Module = Union[str, os.PathLike, types.ModuleType]


def _module_source(module: types.ModuleType) -> str:
    """A module object's source: inspect's, else the file it was loaded from."""
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        pass
    path = getattr(module, "__file__", None)
    if path and path.endswith(".py") and os.path.isfile(path):
        return Path(path).read_text(encoding="utf-8")
    raise TypeError(f"kcv.verify: the module {module.__name__!r} has no Python source to judge "
                    f"(__file__ = {path!r}); pass its source text or the path of its .py file")


def source_label(source: str) -> str:
    """The name a record gives a problem or candidate passed as source text."""
    return f"<source sha256:{hashlib.sha256(source.encode('utf-8')).hexdigest()[:16]}>"


class _Inputs:
    """The problem's and candidate's files; source text lives in a folder removed on exit."""

    def __init__(self):
        self.folder: tempfile.TemporaryDirectory | None = None
        self.labels: dict[str, str] = {}   # written file -> its label in the record

    def path(self, what: str, value: Module) -> str:
        if isinstance(value, types.ModuleType):
            return self._write(_module_source(value))
        if isinstance(value, str) and "\n" in value and not os.path.isfile(value):
            return self._write(value)
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"kcv.verify: the {what} must be a path, source text or a module, "
                            f"not {type(value).__name__}")
        path = Path(value).resolve()
        if not path.is_file():
            # Source text always spans lines, so a single line that names no file is a wrong path.
            raise FileNotFoundError(f"kcv.verify: the {what} {str(value)!r} is not a file (source text "
                                    f"is recognised by its line breaks)")
        return str(path)

    def _write(self, source: str) -> str:
        if self.folder is None:
            self.folder = tempfile.TemporaryDirectory(prefix="kcv-source-")
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        path = os.path.join(self.folder.name, f"kcv_source_{digest[:16]}.py")
        if not os.path.exists(path):
            Path(path).write_text(source, encoding="utf-8")
        self.labels[path] = source_label(source)
        return path

    def relabel(self, value: Any) -> Any:
        """The record with every path of a written file replaced by its label."""
        if not self.labels:
            return value
        if isinstance(value, str):
            for path, label in self.labels.items():
                value = value.replace(path, label)
            return value
        if isinstance(value, dict):
            return {k: self.relabel(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.relabel(v) for v in value]
        return value

    def close(self) -> None:
        if self.folder is not None:
            self.folder.cleanup()


def verify(
    reference: Module,
    candidate: Module,
    *,
    device: str = "cpu",
    seed: int = 0,
    gates: list[str] | None = None,
    quick: bool = False,
    stage_timeout_s: float = 300.0,
    load_timeout_s: float = LOAD_TIMEOUT_S,
    settings: dict | None = None,
    python: str = sys.executable,
    env: dict | None = None,
    on_event: Callable[[dict], None] | None = None,
) -> Record:
    """Judges a KernelBench candidate (a module defining ModelNew) against its problem module.

    ``reference`` and ``candidate`` are each a path, the module's source text (a string holding
    a newline that names no file) or an imported module object (its source is judged). Pure and
    seeded: the same sources, device and seed give the same verdicts and the same record, apart
    from ``seconds`` and ``timing`` (docs/kernelbench.md). A candidate that does not
    load gives a record with an error, not an exception. ``on_event`` receives every event of
    the worker protocol as a dict. Returns the record; ``record.gates["ORD-02"]["verdict"]``,
    ``record.standard_check``, ``record.failed``, ``record.timing``.
    """
    from . import _core

    inputs = _Inputs()
    try:
        reference_path = inputs.path("reference", reference)
        candidate_path = inputs.path("candidate", candidate)
        request = {
            "id": inputs.labels.get(candidate_path, candidate_path),
            "reference": reference_path,
            "candidate": candidate_path,
            "device": device,
            "seed": seed,
            "settings": {"seed": seed, "quick": quick, **(settings or {})},
            "stage_timeout_s": stage_timeout_s,
        }
        if gates is not None:
            request["gates"] = list(gates)

        def relay(event: dict) -> None:
            if on_event is not None:
                on_event(inputs.relabel(event))

        raw = _core.judge_python_json(
            json.dumps(request), python=python, env={k: str(v) for k, v in (env or {}).items()},
            stage_timeout_s=stage_timeout_s, load_timeout_s=load_timeout_s, on_event=relay)
        record = inputs.relabel(json.loads(_core.normalise_record(raw)))
    finally:
        inputs.close()
    return Record(record)
