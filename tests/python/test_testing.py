"""kcv.testing: assert_kernel's verdicts and messages on the project's own kernels, and the pytest
plugin's fixture, options, journal and summary line (run in a child pytest)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

kcv = pytest.importorskip("kcv")
pytest.importorskip("kcv.testing", reason="this kcv installation predates kcv.testing (reinstall the package)")
from kcv.testing import KernelVerificationError, assert_kernel, format_failures  # noqa: E402

from conftest import candidate, problem  # noqa: E402

KERNELS = Path(kcv.kernel_dir())


def kernel(role: str, name: str) -> str:
    path = KERNELS / f"kcv_{role}_{name}.so"
    if not path.exists():
        pytest.skip(f"{path} is not built")
    return str(path)


def test_an_honest_kernel_passes_and_returns_its_record():
    record = assert_kernel(kernel("controls", "elementwise"), "relu-f32", quick=True)
    assert record["contract"] == "relu-f32"
    assert record["any_violation"] is False
    assert {g["id"] for g in record["gates"]} >= {"ORD-01", "EXC-01", "RES-01"}


def test_message_is_laid_out_like_assert_close():
    with pytest.raises(AssertionError) as info:
        assert_kernel(kernel("redteam", "relu_fmaxf"), "relu-f32", quick=True)
    err = info.value
    assert isinstance(err, KernelVerificationError)
    assert err.gates == ["EXC-01"]
    text = str(err)
    lines = text.split("\n")
    assert lines[0] == "Kernel verification failed!"
    assert lines[1] == ""
    assert lines[2].startswith("Gate EXC-01 (non-finite propagation) failed: nan-swallowed: ")
    assert "Signature: nan-swallowed" in lines
    ev = next(g for g in err.record["gates"] if g["id"] == "EXC-01")["evidence"][0]
    assert f"Probe: {ev['probe']}" in lines
    m = re.search(r"^Mismatched elements: (\d+) / (\d+) \((\d+\.\d)%\)$", text, re.M)
    assert m, text
    bad, total = int(m.group(1)), int(m.group(2))
    assert bad == ev["detail"]["count"] and 0 < bad < total
    assert m.group(3) == f"{100.0 * bad / total:.1f}"
    index = "(" + ", ".join(str(c) for c in ev["worst_coords"]) + ")"
    assert f"Expected nan (0x7fc00000), got 0 (0x00000000) at index {index}" in lines
    assert f"Replay: {ev['replay']}" in lines
    assert ev["replay"].startswith("kcv verify --contract relu-f32 ")
    assert lines[-1].startswith("Contract: relu-f32; candidate: ")


def test_numeric_failure_names_the_shape_and_the_probe():
    with pytest.raises(KernelVerificationError) as info:
        assert_kernel(kernel("redteam", "relu_missing_tail_mask"), "relu-f32", quick=True)
    assert info.value.gates == ["CMP-01"]
    text = str(info.value)
    assert re.search(r"^Probe: CMP-01/N=\d+$", text, re.M), text
    assert "--gate CMP-01 --probe CMP-01/N=" in text


def test_greatest_difference_carries_the_bound():
    rec = {"contract": "x", "candidate": {"path": "k.so"},
           "gates": [{"id": "ORD-01", "name": "reordered-reduction tolerance", "verdict": "fail",
                      "signature": ["error-bound"], "reason": "r = 4 > 1",
                      "evidence": [{"probe": "ORD-01/task/seed=0", "worst_coords": [3, 17], "expected": 1.5,
                                    "expected_bits": "0x3fc00000", "actual": 1.5078125,
                                    "actual_bits": "0x3fc10000", "replay": "kcv verify --probe ORD-01/task/seed=0",
                                    "detail": {"err": 0.0078125, "tau": 0.001953125, "compared": 4096,
                                               "violations": 12}}]}]}
    text = format_failures(rec, ["ORD-01"])
    assert text.split("\n\n")[1].split("\n") == [
        "Gate ORD-01 (reordered-reduction tolerance) failed: r = 4 > 1",
        "Signature: error-bound",
        "Probe: ORD-01/task/seed=0",
        "Mismatched elements: 12 / 4096 (0.3%)",
        "Greatest absolute difference: 0.0078125 at index (3, 17) (up to 0.00195312 allowed)",
        "Expected 1.5 (0x3fc00000), got 1.50781 (0x3fc10000) at index (3, 17)",
        "Replay: kcv verify --probe ORD-01/task/seed=0",
    ]


def test_gates_and_profiles_limit_what_is_asserted():
    lib = kernel("redteam", "relu_fmaxf")
    record = assert_kernel(lib, "relu-f32", quick=True, gates=["ORD-01", "RES-01"])
    # The same record under profiles: fast-math accepts nan-swallowed, ftz does not.
    assert assert_kernel(lib, "relu-f32", record=record, profile="fast-math") is record
    with pytest.raises(KernelVerificationError):
        assert_kernel(lib, "relu-f32", record=record, profile="ftz")
    with pytest.raises(ValueError):
        assert_kernel(lib, "relu-f32", record=record, profile="lenient")


def test_unjudged_gates_and_unloadable_candidates_fail_closed(tmp_path):
    rec = {"contract": "x", "candidate": {"path": "k.so"}, "floor": {"strict": False},
           "gates": [{"id": "ORD-01", "verdict": "pass"},
                     {"id": "RES-02", "name": "launch and resource budget", "verdict": "error", "code": "timeout",
                      "reason": "worker timed out"}]}
    with pytest.raises(KernelVerificationError) as info:
        assert_kernel("k.so", "x", record=rec)
    assert "Gate RES-02 (launch and resource budget) could not be judged: worker timed out" in str(info.value)
    assert "Code: timeout" in str(info.value)

    missing = tmp_path / "absent.so"
    with pytest.raises(KernelVerificationError) as info:
        assert_kernel(missing, "relu-f32", quick=True)
    text = str(info.value)
    assert "The candidate could not be judged (load-failed)" in text
    assert "Gate" not in text   # the record's error explains every gate it left unjudged
    with pytest.raises(ValueError):
        assert_kernel("k.so")


def test_kernelbench_module_through_kcv_verify():
    pytest.importorskip("torch")
    record = assert_kernel(candidate("relu_correct_torch"), reference=problem("relu"), quick=True,
                           gates=["ORD-01", "EXC-01"])
    assert {g["id"]: g["verdict"] for g in record["gates"]} == {"ORD-01": "pass", "EXC-01": "pass"}
    with pytest.raises(KernelVerificationError) as info:
        assert_kernel(candidate("relu_nan_swallowed"), reference=problem("relu"), quick=True, gates=["EXC-01"])
    assert info.value.gates == ["EXC-01"]
    assert "nan-swallowed" in str(info.value)


PLUGIN_TEST = '''
import kcv

K = kcv.kernel_dir()

def test_honest(kcv_verify):
    record = kcv_verify(K + "/kcv_controls_elementwise.so", contract="relu-f32")
    assert record["settings"]["quick"] is True
    assert record["settings"]["seed"] == 3

def test_fmaxf(kcv_verify):
    kcv_verify(K + "/kcv_redteam_relu_fmaxf.so", contract="relu-f32")
'''


def test_pytest_plugin_fixture_options_journal_and_summary(tmp_path):
    kernel("redteam", "relu_fmaxf")
    (tmp_path / "test_kernels.py").write_text(PLUGIN_TEST)
    journal = tmp_path / "out" / "journal.jsonl"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "kcv.testing.plugin", "-q", "-p", "no:cacheprovider",
         "--kcv-quick", "--kcv-seed", "3", "--kcv-journal", str(journal), "test_kernels.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed" in out
    assert "Kernel verification failed!" in out
    assert "Gate EXC-01 (non-finite propagation) failed" in out
    assert re.search(r"^1 passed, 1 failed$", out, re.M), out
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r["corpus_id"] for r in records] == ["test_kernels.py::test_honest", "test_kernels.py::test_fmaxf"]
    assert [r["any_violation"] for r in records] == [False, True]
    assert all(r["settings"]["seed"] == 3 and r["settings"]["quick"] for r in records)
