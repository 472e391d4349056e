"""kcv: contract-grade correctness verification for GPU kernels.

The judging lives in libkcv (C++); this package loads candidates, calls them and hands what they
produced to the core. ``kcv._core`` is the compiled module.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent

# The installed tree mirrors the build tree: kcv/bin/kcv and kcv/kernels/*.so.
if "KCV_KERNEL_DIR" not in os.environ and (_HERE / "kernels").is_dir():
    os.environ["KCV_KERNEL_DIR"] = str(_HERE / "kernels")


def kernel_dir() -> str:
    """Directory of the kernels built with kcv (positive controls and the red team)."""
    return os.environ.get("KCV_KERNEL_DIR", str(_HERE / "kernels"))


def verify_native(contract: str, candidate: str, *, seed: int = 0, quick: bool = False) -> dict:
    """Verifies a native candidate (a shared library exporting ``kcv_kernel``); returns the record."""
    return json.loads(_load_core().verify_native_json(contract, str(candidate), seed, quick, kernel_dir()))


def redteam(*, seed: int = 0, quick: bool = False) -> dict:
    """Runs the red team and the positive controls; returns ``{"redteam": [...], "controls": [...]}``."""
    return json.loads(_load_core().redteam_json(seed, quick, kernel_dir()))


def _load_core():
    """libkcv, loaded after torch wherever torch is installed. On a CUDA build, importing kcv._core
    before torch made torch's own import crash (a segmentation fault in its operator lookup while
    torch.ao.quantization loads; torch 2.11 with CUDA 13, on an H200 machine); torch first is
    safe. So the package loads libkcv lazily: ``import kcv`` (the console script, the pytest
    plugin) loads neither, and the first use loads torch, then libkcv."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    return importlib.import_module("kcv._core")


def __getattr__(name: str):
    # ``from . import _core`` in kcv's modules, kcv.__version__, kcv.verify and kcv.Record land
    # here the first time (PEP 562).
    if name == "_core":
        return _load_core()
    if name == "__version__":
        return _load_core().__version__
    if name == "verify":
        _load_core()
        from .sandbox import verify

        return verify
    if name == "Record":
        from .record import Record

        return Record
    raise AttributeError(f"module 'kcv' has no attribute {name!r}")


__all__ = ["Record", "__version__", "kernel_dir", "redteam", "verify", "verify_native"]
