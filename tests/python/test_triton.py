"""Triton candidates under Triton's interpreter (TRITON_INTERPRET=1): no GPU needed."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from conftest import candidate, has_triton, problem  # noqa: E402

ok, why = has_triton()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def test_triton_relu_is_loaded_from_a_file_and_passes():
    import kcv

    r = kcv.verify(problem("relu"), candidate("relu_triton"), quick=True, env={"TRITON_INTERPRET": "1"},
                   gates=["ORD-01", "ORD-02", "CMP-01", "EXC-01"])
    assert r.error is None, r.error
    assert r.standard_check["tol_1e-4"], r.standard_check
    for gate in ("ORD-01", "ORD-02", "CMP-01", "EXC-01"):
        assert r.gates[gate]["verdict"] == "pass", (gate, r.gates[gate]["reason"])
