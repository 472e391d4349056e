"""`import kcv` loads neither libkcv nor torch; libkcv, when it loads, comes after torch (on a CUDA
build, libkcv first made torch's own import crash on a GPU machine)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          timeout=300).stdout


def test_import_kcv_loads_neither_libkcv_nor_torch():
    out = run("import sys, kcv, kcv.testing, kcv._launcher; "
              "print('kcv._core' in sys.modules, 'torch' in sys.modules)")
    assert out.split() == ["False", "False"]


def test_libkcv_loads_after_torch_however_it_is_reached():
    pytest.importorskip("torch")
    probe = ("import sys, builtins\n"
             "order = []\n"
             "real = builtins.__import__\n"
             "def watch(name, *a, **k):\n"
             "    m = real(name, *a, **k)\n"
             "    for n in ('torch', 'kcv._core'):\n"
             "        if n in sys.modules and n not in order: order.append(n)\n"
             "    return m\n"
             "builtins.__import__ = watch\n"
             "import kcv\n"
             "{use}\n"
             "print(' '.join(order))\n")
    for use in ("kcv.__version__", "from kcv import _core", "kcv.verify", "import kcv.task",
                "import kcv.executor"):
        assert run(probe.format(use=use)).split() == ["torch", "kcv._core"], use


def test_the_version_and_the_api_are_still_there():
    out = run("import kcv; print(kcv.__version__, callable(kcv.verify), kcv.Record.__name__, "
              "callable(kcv.redteam), kcv.kernel_dir() != '')").split()
    assert out[0][0].isdigit() and out[1:] == ["True", "Record", "True", "True"], out
