"""The float64 oracle from Python: the token-by-token recurrence of gdn/oracle, with the magnitude
scales of the analytic error model, through kcv._core's gdn_oracle_forward / gdn_oracle_backward.
Accepts torch tensors or numpy arrays; returns dicts of float64 numpy arrays.

operand_floor: 0 (the default), or the smallest normal of the operand format a contract allows
(2**-126 for bf16 and tf32), at which every operand's magnitude is floored in the scales, as the
verifier passes it for a contract that declares `bf16_operands` or `tf32_operands` (docs/gdn.md,
"The operand floor"). Where no operand's magnitude lies below it the scales keep their bits."""

from __future__ import annotations

from typing import Optional

import numpy as np


def _core():
    from .. import _core as core

    if not hasattr(core, "gdn_oracle_forward"):
        raise RuntimeError("kcv._core was built without the recurrence oracle bindings")
    return core


def _f64(x) -> Optional[np.ndarray]:
    if x is None:
        return None
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.ascontiguousarray(x, dtype=np.float64)


def _cu(cu_seqlens) -> Optional[list[int]]:
    if cu_seqlens is None:
        return None
    return [int(c) for c in (cu_seqlens.tolist() if hasattr(cu_seqlens, "tolist") else cu_seqlens)]


def oracle_forward(member: str, q, k, v, g=None, beta=None, *, scale: Optional[float] = None,
                   initial_state=None, cu_seqlens=None, operand_floor: float = 0.0) -> dict:
    """{"o", "ht", "o_scale", "ht_scale"}."""
    q = _f64(q)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return _core().gdn_oracle_forward(member, q, _f64(k), _f64(v), _f64(g), _f64(beta), _f64(initial_state),
                                      float(scale), _cu(cu_seqlens), float(operand_floor))


def oracle_backward(member: str, q, k, v, g=None, beta=None, *, do, dht=None, scale: Optional[float] = None,
                    initial_state=None, cu_seqlens=None, operand_floor: float = 0.0) -> dict:
    """{"dq", "dk", "dv", "dh0", ["dg"], ["dbeta"]} and each with "_scale" appended."""
    q = _f64(q)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return _core().gdn_oracle_backward(member, q, _f64(k), _f64(v), _f64(g), _f64(beta), _f64(initial_state),
                                       _f64(do), _f64(dht), float(scale), _cu(cu_seqlens), float(operand_floor))
