"""kcv: contract-grade correctness verification for GPU kernels.

The judging lives in libkcv (C++); this package loads candidates, calls them and hands what they
produced to the core. ``kcv._core`` is the compiled module.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import _core

__version__ = _core.__version__
_HERE = Path(__file__).resolve().parent

# The installed tree mirrors the build tree: kcv/bin/kcv and kcv/kernels/*.so.
if "KCV_KERNEL_DIR" not in os.environ and (_HERE / "kernels").is_dir():
    os.environ["KCV_KERNEL_DIR"] = str(_HERE / "kernels")


def kernel_dir() -> str:
    """Directory of the kernels built with kcv (positive controls and the red team)."""
    return os.environ.get("KCV_KERNEL_DIR", str(_HERE / "kernels"))


def verify_native(contract: str, candidate: str, *, seed: int = 0, quick: bool = False) -> dict:
    """Verifies a native candidate (a shared library exporting ``kcv_kernel``); returns the record."""
    return json.loads(_core.verify_native_json(contract, str(candidate), seed, quick, kernel_dir()))


def redteam(*, seed: int = 0, quick: bool = False) -> dict:
    """Runs the red team and the positive controls; returns ``{"redteam": [...], "controls": [...]}``."""
    return json.loads(_core.redteam_json(seed, quick, kernel_dir()))


from .record import Record  # noqa: E402
from .sandbox import verify  # noqa: E402

__all__ = ["Record", "__version__", "kernel_dir", "redteam", "verify", "verify_native"]
