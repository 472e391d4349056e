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
    # The interpreter compiles nothing: each gate's compile time is there, and zero.
    assert r.timing["gates_compile_s"] == {g: 0.0 for g in ("ORD-01", "ORD-02", "CMP-01", "EXC-01")}, r.timing
    assert r.timing["standard_check_compile_s"] == 0.0, r.timing


def test_the_compile_clock_times_what_triton_compiles_and_keeps_hooks_already_there(monkeypatch):
    import time

    from triton import knobs

    from kcv.worker import _TritonCompileClock

    calls = []
    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", lambda **kw: calls.append(("before", kw["key"])) or kw["skip"])
    monkeypatch.setattr(knobs.runtime, "jit_post_compile_hook", lambda **kw: calls.append(("after", kw["key"])))
    clock = _TritonCompileClock()
    assert clock.seconds == 0.0
    # A compilation as Triton's JIT makes one: the hook before it, the compiler, the hook after.
    assert not knobs.runtime.jit_cache_hook(key="a", skip=False)
    time.sleep(0.05)
    knobs.runtime.jit_post_compile_hook(key="a")
    assert 0.05 <= clock.seconds < 1.0
    # A hook already there that skips the compilation is obeyed, and nothing is timed.
    assert knobs.runtime.jit_cache_hook(key="b", skip=True)
    assert calls == [("before", "a"), ("after", "a"), ("before", "b")]
