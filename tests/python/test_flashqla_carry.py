"""bench/flashqla_carry.py without network: a wheel pruned, unpacked and zipped again keeps a RECORD
that lists exactly its files with their hashes, and pip installs it."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "bench" / "flashqla_carry.py"
spec = importlib.util.spec_from_file_location("flashqla_carry", TOOL)
carry = importlib.util.module_from_spec(spec)
spec.loader.exec_module(carry)


def make_wheel(folder: Path) -> Path:
    """A small pure-Python wheel, demo 1.0, with a folder that a CUDA machine would not need."""
    wheel = folder / "demo-1.0-py3-none-any.whl"
    files = {
        "demo/__init__.py": b"VALUE = 42\n",
        "demo/tool.sh": b"#!/bin/sh\necho demo\n",
        "demo/3rdparty/amd/big.hpp": b"// not for CUDA\n" * 100,
        "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
        "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o755 if name.endswith(".sh") else 0o644) << 16
            z.writestr(info, data)
        z.writestr("demo-1.0.dist-info/RECORD", "".join(f"{n},,\n" for n in files) + "demo-1.0.dist-info/RECORD,,\n")
    return wheel


def test_pruned_wheel_has_a_true_record_and_installs(tmp_path):
    wheel = make_wheel(tmp_path)
    folder = carry.unpack_pruned(wheel, tmp_path / "unpacked", ["demo/3rdparty/amd"])
    assert not (folder / "demo/3rdparty/amd").exists()
    assert (folder / "demo/tool.sh").stat().st_mode & 0o111, "the executable bit was lost"

    rebuilt = tmp_path / "wheels" / wheel.name
    rebuilt.parent.mkdir()
    carry.zip_wheel(folder, rebuilt)
    with zipfile.ZipFile(rebuilt) as z:
        names = z.namelist()
        assert names[-1] == "demo-1.0.dist-info/RECORD"
        record = [line.split(",") for line in z.read(names[-1]).decode().splitlines()]
        listed = {name: (digest, size) for name, digest, size in record}
        assert set(listed) == set(names) and not any(n.startswith("demo/3rdparty") for n in names)
        for name in names[:-1]:
            data = z.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert listed[name] == (f"sha256={digest}", str(len(data))), name

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site),
                    str(rebuilt)], check=True)
    assert (site / "demo" / "__init__.py").read_text() == "VALUE = 42\n"


def test_a_path_to_drop_that_is_missing_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="no demo/missing to drop"):
        carry.unpack_pruned(make_wheel(tmp_path), tmp_path / "unpacked", ["demo/missing"])


def test_install_without_a_pack_says_what_to_do(tmp_path, capsys):
    with pytest.raises(SystemExit):
        carry.main(["install", "--carry", str(tmp_path)])
    assert "run 'pack' where PyPI is reachable" in capsys.readouterr().err
