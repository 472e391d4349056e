"""torch.library custom ops over the recurrence kernels, with autograd and fake-tensor support.

Two ops, ``kcv_gdn::forward`` and ``kcv_gdn::backward``. On CUDA tensors they run the CUDA
kernels (gdn/cuda, through ctypes); on CPU tensors they run the token-by-token recurrence of
reference.py and its exact adjoint in float32, so the ops work, slowly, anywhere. The public functions are in __init__.py.

With ``keep`` the CUDA forward also returns the chunk preparation (decays, intra-chunk scores
and, for the delta rule, T, W and U) as an opaque byte tensor, which autograd saves and hands to
the backward so that it does not prepare the chunks again: the same bits, less time, more
memory held between the passes (docs/gdn.md). On the CPU, or without ``keep``, it is empty.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import _library, reference

_EMPTY = (0,)


def _empty(like: torch.Tensor) -> torch.Tensor:
    return like.new_empty(_EMPTY)


@torch.library.custom_op("kcv_gdn::forward", mutates_args=())
def forward_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: Optional[torch.Tensor],
    beta: Optional[torch.Tensor],
    initial_state: Optional[torch.Tensor],
    cu_seqlens: Optional[torch.Tensor],
    gate: int,
    delta: bool,
    scale: float,
    keep: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(o [B,T,HV,V] in q's dtype, final state [N,HV,K,V] float32, kept preparation: uint8, empty
    on the CPU or without keep)."""
    with torch.no_grad():
        o, ht = reference.recurrence(
            q.float(), k.float(), v.float(), g, beta, gate=gate, delta=delta, scale=scale,
            initial_state=initial_state, cu_seqlens=cu_seqlens,
        )
    return o.to(q.dtype), ht.float(), q.new_empty(_EMPTY, dtype=torch.uint8)


def _prepared_bytes(q, v, cu_seqlens, gate, delta) -> int:
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else None
    return _library.prepared_bytes(B, T, H, HV, K, V, N, gate, delta)


@forward_op.register_kernel("cuda")
def _forward_cuda(q, k, v, g, beta, initial_state, cu_seqlens, gate, delta, scale, keep):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
    o = torch.empty(B, T, HV, V, dtype=q.dtype, device=q.device)
    ht = torch.empty(N, HV, K, V, dtype=torch.float32, device=q.device)
    prepared = torch.empty(_prepared_bytes(q, v, cu_seqlens, gate, delta) if keep else 0, dtype=torch.uint8,
                           device=q.device)
    with torch.cuda.device(q.device):
        p = _library.make_params(q, k, v, g, beta, initial_state, cu_seqlens, gate, delta, scale)
        p.o, p.ht = o.data_ptr(), ht.data_ptr()
        if keep:
            p.prepared, p.prepared_bytes = prepared.data_ptr(), prepared.numel()
        _library.run(p, backward=False, device=q.device)
    return o, ht, prepared


@forward_op.register_fake
def _forward_fake(q, k, v, g, beta, initial_state, cu_seqlens, gate, delta, scale, keep):
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    N = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else B
    if not keep or q.device.type != "cuda":
        kept = 0
    elif _library.available():
        kept = _prepared_bytes(q, v, cu_seqlens, gate, delta)
    else:
        # No library to size it here (it sizes it from the shapes at run time).
        kept = torch.library.get_ctx().new_dynamic_size()
    return (q.new_empty(B, T, HV, V), q.new_empty(N, HV, K, V, dtype=torch.float32),
            q.new_empty(kept, dtype=torch.uint8))


@torch.library.custom_op("kcv_gdn::backward", mutates_args=())
def backward_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: Optional[torch.Tensor],
    beta: Optional[torch.Tensor],
    initial_state: Optional[torch.Tensor],
    cu_seqlens: Optional[torch.Tensor],
    do: torch.Tensor,
    dht: Optional[torch.Tensor],
    prepared: Optional[torch.Tensor],
    gate: int,
    delta: bool,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv, dg, dbeta, dh0); dg, dbeta, dh0 are empty where the member or the call has no
    such input. prepared: what a forward of the same inputs kept (forward_op's third output), or
    None or empty to prepare the chunks again; the CPU path has nothing to read in it."""
    grads = reference.recurrence_backward(
        q.float(), k.float(), v.float(), g, beta, do, dht, gate=gate, delta=delta, scale=scale,
        initial_state=initial_state, cu_seqlens=cu_seqlens,
    )
    dg = grads["dg"].float() if gate else _empty(q).float()
    dbeta = grads["dbeta"].to(q.dtype) if delta else _empty(q)
    dh0 = grads["dh0"].float() if initial_state is not None else _empty(q).float()
    return grads["dq"].to(q.dtype), grads["dk"].to(k.dtype), grads["dv"].to(v.dtype), dg, dbeta, dh0


@backward_op.register_kernel("cuda")
def _backward_cuda(q, k, v, g, beta, initial_state, cu_seqlens, do, dht, prepared, gate, delta, scale):
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dg = torch.empty_like(g) if gate else _empty(q).float()
    dbeta = torch.empty_like(beta) if delta else _empty(q)
    dh0 = torch.empty_like(initial_state) if initial_state is not None else _empty(q).float()
    with torch.cuda.device(q.device):
        p = _library.make_params(q, k, v, g, beta, initial_state, cu_seqlens, gate, delta, scale)
        p.d_o, p.dht = do.data_ptr(), (dht.data_ptr() if dht is not None else None)
        p.dq, p.dk, p.dv = dq.data_ptr(), dk.data_ptr(), dv.data_ptr()
        p.dg = dg.data_ptr() if gate else None
        p.dbeta = dbeta.data_ptr() if delta else None
        p.dh0 = dh0.data_ptr() if initial_state is not None else None
        if prepared is not None and prepared.numel():
            p.prepared, p.prepared_bytes = prepared.data_ptr(), prepared.numel()
        _library.run(p, backward=True, device=q.device)
    return dq, dk, dv, dg, dbeta, dh0


@backward_op.register_fake
def _backward_fake(q, k, v, g, beta, initial_state, cu_seqlens, do, dht, prepared, gate, delta, scale):
    dg = torch.empty_like(g) if gate else q.new_empty(_EMPTY, dtype=torch.float32)
    dbeta = torch.empty_like(beta) if delta else q.new_empty(_EMPTY)
    dh0 = torch.empty_like(initial_state) if initial_state is not None else q.new_empty(_EMPTY, dtype=torch.float32)
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), dg, dbeta, dh0


def _setup_context(ctx, inputs, output):
    q, k, v, g, beta, initial_state, cu_seqlens, gate, delta, scale, keep = inputs
    prepared = output[2]
    ctx.mark_non_differentiable(prepared)
    ctx.save_for_backward(q, k, v, g, beta, initial_state, cu_seqlens, prepared)
    ctx.gate, ctx.delta, ctx.scale = gate, delta, scale


def _backward(ctx, do, dht, _dprepared):
    q, k, v, g, beta, initial_state, cu_seqlens, prepared = ctx.saved_tensors
    dq, dk, dv, dg, dbeta, dh0 = backward_op(
        q, k, v, g, beta, initial_state, cu_seqlens, do.contiguous(),
        None if dht is None else dht.contiguous(), prepared, ctx.gate, ctx.delta, ctx.scale,
    )
    return (
        dq, dk, dv,
        dg if ctx.gate else None,
        dbeta if ctx.delta else None,
        dh0 if initial_state is not None else None,
        None, None, None, None, None,
    )


forward_op.register_autograd(_backward, setup_context=_setup_context)
