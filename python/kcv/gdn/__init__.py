"""kcv.gdn: the gated-linear-recurrence family as PyTorch ops.

Five members of one recurrence (docs/gdn.md), each with the signature of flash-linear-attention's
chunked functions:

    o, final_state = chunk_gated_delta_rule(q, k, v, g, beta, scale=None, initial_state=None,
                                            output_final_state=False, cu_seqlens=None)

q, k [B,T,H,K]; v [B,T,HV,V] with HV a multiple of H; g: log decay, [B,T,HV] (scalar gate) or
[B,T,HV,K] (per channel); beta [B,T,HV] after the sigmoid; states [N,HV,K,V] float32; with
cu_seqlens (N+1 integer offsets, non-decreasing from 0 to T) B must be 1 and sequence n is tokens
[cu[n], cu[n+1]); offsets given on the CPU are checked, offsets on the GPU are never read back. CUDA tensors run the sm_90a kernels; CPU tensors a
float32 token-by-token recurrence. Differentiable in q, k, v, g, beta and initial_state.

Under autograd on CUDA the forward keeps its chunk preparation for the backward, which then does
not redo it: the same bits, a faster backward, and more memory held until the backward runs (about
six times q's size for Gated DeltaNet in bf16 with K = V = 128; docs/gdn.md). keep_preparation=False
trades that memory back for the time.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import ops, reference
from ._library import available as cuda_kernels_available
from .reference import MEMBERS


def recurrence(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: Optional[torch.Tensor] = None,
    beta: Optional[torch.Tensor] = None,
    *,
    member: str,
    scale: Optional[float] = None,
    initial_state: Optional[torch.Tensor] = None,
    output_final_state: bool = False,
    cu_seqlens: Optional[torch.Tensor] = None,
    keep_preparation: Optional[bool] = None,
) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Any member by name ("linear_attention", "ssd", "gla", "gdn", "kda"). keep_preparation: keep
    the forward's chunk preparation for the backward (None: whenever autograd will run one)."""
    if member not in MEMBERS:
        raise ValueError(f"unknown member {member!r}; known: {', '.join(MEMBERS)}")
    gate, delta = MEMBERS[member]
    if q.dim() != 4 or k.shape != q.shape or v.dim() != 4 or v.shape[:2] != q.shape[:2]:
        raise ValueError("q, k must be [B,T,H,K] and v [B,T,HV,V]")
    B, T, H, K = q.shape
    HV = v.shape[2]
    if HV % H:
        raise ValueError(f"HV = {HV} is not a multiple of H = {H}")
    if gate == 0:
        g = None
    elif g is None:
        raise ValueError(f"{member} needs g")
    else:
        want = (B, T, HV) if gate == 1 else (B, T, HV, K)
        if tuple(g.shape) != want:
            raise ValueError(f"g must be {list(want)}, got {list(g.shape)}")
        g = g.float().contiguous()
    if delta:
        if beta is None or tuple(beta.shape) != (B, T, HV):
            raise ValueError(f"{member} needs beta of shape [{B}, {T}, {HV}]")
        beta = beta.to(q.dtype).contiguous()
    else:
        beta = None
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError("cu_seqlens needs B = 1")
        if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
            raise ValueError("cu_seqlens must be 1-D with at least two offsets")
        if cu_seqlens.device.type == "cpu":
            # Offsets still on the host are checked here; offsets already on the GPU are not read
            # back (that would synchronise), and must satisfy the same rule.
            cu = cu_seqlens.tolist()
            if cu[0] != 0 or cu[-1] != T or any(b < a for a, b in zip(cu, cu[1:])):
                raise ValueError(f"cu_seqlens must be non-decreasing from 0 to T = {T}, got {cu}")
        cu_seqlens = cu_seqlens.to(device=q.device, dtype=torch.int64).contiguous()
    if initial_state is not None:
        initial_state = initial_state.float().contiguous()
    if scale is None:
        scale = K ** -0.5
    if keep_preparation is None:
        keep_preparation = torch.is_grad_enabled() and any(
            x is not None and x.requires_grad for x in (q, k, v, g, beta, initial_state)
        )
    keep = bool(keep_preparation) and q.device.type == "cuda"
    o, ht, _ = ops.forward_op(
        q.contiguous(), k.to(q.dtype).contiguous(), v.to(q.dtype).contiguous(), g, beta, initial_state,
        cu_seqlens, gate, delta, float(scale), keep,
    )
    return o, (ht if output_final_state else None)


def _member_fn(member: str, with_g: bool, with_beta: bool):
    def fn(q, k, v, *args, scale=None, initial_state=None, output_final_state=False, cu_seqlens=None,
           keep_preparation=None, **kw):
        names = (["g"] if with_g else []) + (["beta"] if with_beta else [])
        values = dict(zip(names, args))
        values.update({n: kw.pop(n) for n in names if n in kw})
        if kw:
            raise TypeError(f"unexpected arguments: {', '.join(kw)}")
        return recurrence(
            q, k, v, values.get("g"), values.get("beta"), member=member, scale=scale,
            initial_state=initial_state, output_final_state=output_final_state, cu_seqlens=cu_seqlens,
            keep_preparation=keep_preparation,
        )

    fn.__name__ = member
    return fn


#: Linear attention: (q, k, v, ...).
chunk_linear_attn = _member_fn("linear_attention", False, False)
#: SSD / Mamba-2 / simple GLA, one log decay per head: (q, k, v, g, ...).
chunk_simple_gla = _member_fn("ssd", True, False)
#: GLA, per-channel log decay: (q, k, v, g, ...).
chunk_gla = _member_fn("gla", True, False)
#: Gated DeltaNet: (q, k, v, g, beta, ...).
chunk_gated_delta_rule = _member_fn("gdn", True, True)
#: KDA, per-channel decay with the delta rule: (q, k, v, g, beta, ...).
chunk_kda = _member_fn("kda", True, True)

__all__ = [
    "MEMBERS",
    "chunk_gated_delta_rule",
    "chunk_gla",
    "chunk_kda",
    "chunk_linear_attn",
    "chunk_simple_gla",
    "cuda_kernels_available",
    "recurrence",
    "reference",
]
