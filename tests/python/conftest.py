"""Shared pieces of the Python tests: the data folder and in-process executors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
PROBLEMS = DATA / "problems"
CANDIDATES = DATA / "candidates"


def kcv_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The installed kcv command, run as a user runs it."""
    return subprocess.run([sys.executable, "-m", "kcv", *args], capture_output=True, text=True, check=check,
                          timeout=900)


def audited_run_folder(root: Path, samples: dict[int, tuple[str, dict]]) -> tuple[Path, Path]:
    """A KernelBench run folder (eval_results.json beside level_1_problem_1_sample_<S>_kernel.py,
    problem 1 being the ReLU problem), turned into a corpus by `kcv corpus --bundle` and audited on
    the CPU by `kcv audit --quick`: (corpus file, journal). samples: sample -> (candidate, label)."""
    (root / "problems/level1").mkdir(parents=True)
    shutil.copy(problem("relu"), root / "problems/level1/1_ReLU.py")
    run = root / "runs/model_a"
    run.mkdir(parents=True)
    labels: dict = {"1": []}
    for s, (name, label) in samples.items():
        shutil.copy(candidate(name), run / f"level_1_problem_1_sample_{s}_kernel.py")
        labels["1"].append({"sample_id": s, **label, "metadata": {"correctness_trials": "(5 / 5)"}})
    (run / "eval_results.json").write_text(json.dumps(labels))
    corpus = root / "corpus" / "corpus.jsonl"
    out = kcv_cli("corpus", str(root / "runs"), "--problems", str(root / "problems"), "--out", str(corpus),
                  "--bundle")
    assert f"{len(samples)} candidates written" in out.stdout, out.stdout + out.stderr
    journal = root / "journal.jsonl"
    audit = kcv_cli("audit", str(corpus), "--out", str(journal), "--device", "cpu", "--quick", check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    return corpus, journal


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
