"""GPU-only behaviour: the side-stream hack (CMP-02) and the guarded CUDA allocator (RES-01)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import candidate, problem  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")


def summary(record, gates) -> str:
    return json.dumps({g: {k: record.gates[g].get(k) for k in ("verdict", "signature", "reason", "detail")}
                       for g in gates}, default=str)[:6000]


def test_side_stream_work_fails_cmp02_and_passes_the_standard_check():
    import kcv

    r = kcv.verify(problem("matmul"), candidate("matmul_side_stream"), device="cuda", quick=True,
                   gates=["ORD-01", "CMP-02"])
    assert r.standard_check["tol_1e-4"], r.standard_check
    assert r.gates["CMP-02"]["verdict"] == "fail", summary(r, ["ORD-01", "CMP-02"])


def test_correct_candidate_on_the_gpu():
    import kcv

    r = kcv.verify(problem("matmul"), candidate("matmul_correct"), device="cuda", quick=True,
                   gates=["ORD-01", "ORD-02", "RES-01", "CMP-02"])
    assert r.error is None, r.error
    for gate in ("ORD-01", "ORD-02", "RES-01"):
        assert r.gates[gate]["verdict"] == "pass", summary(r, [gate])
    assert r.gates["CMP-02"]["verdict"] in ("pass", "n/a"), summary(r, ["CMP-02"])
    print(summary(r, ["CMP-02"]))


def test_correct_relu_passes_res01_under_the_guarded_allocator():
    import kcv

    r = kcv.verify(problem("relu"), candidate("relu_correct_torch"), device="cuda", quick=True, gates=["RES-01"])
    assert r.gates["RES-01"]["verdict"] == "pass", summary(r, ["RES-01"])


def test_write_past_the_output_fails_res01_and_passes_the_standard_check():
    pytest.importorskip("cupy")
    import kcv

    r = kcv.verify(problem("relu"), candidate("relu_oob_write"), device="cuda", quick=True, gates=["RES-01"])
    assert r.standard_check["tol_1e-4"], r.standard_check
    assert r.gates["RES-01"]["verdict"] == "fail", summary(r, ["RES-01"])


def test_load_inline_candidate():
    import kcv

    r = kcv.verify(problem("relu"), candidate("relu_load_inline"), device="cuda", quick=True,
                   gates=["ORD-01", "ORD-02", "CMP-01", "EXC-01", "RES-01"])
    assert r.error is None, r.error
    assert r.standard_check["tol_1e-4"], r.standard_check
    for gate in ("ORD-01", "ORD-02", "CMP-01", "EXC-01", "RES-01"):
        assert r.gates[gate]["verdict"] == "pass", summary(r, [gate])
