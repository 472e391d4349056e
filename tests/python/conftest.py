"""Shared pieces of the Python tests: the data folder and in-process executors."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
PROBLEMS = DATA / "problems"
CANDIDATES = DATA / "candidates"


def problem(name: str) -> Path:
    return PROBLEMS / f"{name}.py"


def candidate(name: str) -> Path:
    return CANDIDATES / f"{name}.py"


def executor_for(problem_name: str, candidate_name: str, settings: dict | None = None, device: str = "cpu"):
    """An in-process executor, loaded as the worker loads it (KernelBench's shared context)."""
    from kcv.executor import Executor
    from kcv.kernelbench import open_session
    from kcv.reference import STRICT_FLAGS, precision_flags, set_precision_flags
    from kcv.task import describe

    set_precision_flags(STRICT_FLAGS)
    build_dir = tempfile.mkdtemp(prefix="kcv-test-build-")
    session = open_session(problem(problem_name), candidate(candidate_name), device, build_dir)
    settings = {"seed": 0, "quick": True, **(settings or {})}
    task = describe(session.problem.source, session.problem.path, device, settings)
    return Executor(task, session.candidate.cls, device, precision_flags(), settings)


@pytest.fixture
def strict_flags():
    """Every test starts and ends with PyTorch's precision flags as kcv sets them."""
    from kcv.reference import STRICT_FLAGS, precision_flags, set_precision_flags

    saved = precision_flags()
    set_precision_flags(STRICT_FLAGS)
    yield
    set_precision_flags(saved)
    import torch

    torch.use_deterministic_algorithms(False)


def has_triton() -> tuple[bool, str]:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401  (the interpreter needs it importable too)
    except Exception as e:  # ImportError, or a broken install
        return False, f"triton cannot be imported here: {type(e).__name__}: {e}"
    return True, ""
