"""Inputs on the CPU live between guard bands; a write past them is damage (RES-01)."""

from __future__ import annotations

import ctypes

import pytest

torch = pytest.importorskip("torch")

from kcv import _core  # noqa: E402


def test_tensor_view_writes_go_to_the_guarded_buffer():
    g = _core.GuardedHostTensor("f32", [4, 3], 4096, '{"byte": 165}')
    t = g.tensor()
    assert t.shape == (4, 3) and t.dtype == torch.float32 and t.data_ptr() == g.address
    t.copy_(torch.arange(12.0).reshape(4, 3))
    assert g.tensor().sum().item() == 66.0
    assert g.check_guards("input x") == ""


def test_out_of_bounds_write_is_described():
    g = _core.GuardedHostTensor("bf16", [5], 4096, '{"byte": 165}')
    ctypes.memset(g.address + 5 * 2 + 6, 0, 3)
    assert g.check_guards("input x") == "input x: band after, first changed byte at +6, 3 bytes changed"
    g.poison_guards('{"byte": 90}')
    assert g.check_guards("input x") == ""


def test_view_keeps_the_buffer_alive():
    t = _core.GuardedHostTensor("i64", [3], 64, '{"byte": 1}').tensor()
    t.copy_(torch.tensor([1, 2, 3]))
    import gc

    gc.collect()
    assert t.tolist() == [1, 2, 3]
