"""The recurrence token by token in PyTorch: the readable definition, differentiable by autograd.

    S_t = (I - k_t (b_t * k_t)^T) Diag(exp(g_t)) S_{t-1} + k_t (w_t * v_t)^T,   o_t = scale * S_t^T q_t

with b_t = w_t = beta_t for the delta members (gdn, kda) and b_t = 0, w_t = 1 otherwise. Layout as
the kernels: q, k [B,T,H,K]; v [B,T,HV,V]; g [B,T,HV] (scalar gate) or [B,T,HV,K] (per channel);
beta [B,T,HV]; states [N,HV,K,V]. Computes in the dtype of q (float64 for references, float32
for the CPU path of the ops). Slow: one Python step per token.
"""

from __future__ import annotations

from typing import Optional

import torch

MEMBERS = {
    # name: (gate kind 0 none / 1 scalar / 2 per channel, delta term)
    "linear_attention": (0, False),
    "ssd": (1, False),
    "gla": (2, False),
    "gdn": (1, True),
    "kda": (2, True),
}


def member_of(gate: int, delta: bool) -> str:
    for name, spec in MEMBERS.items():
        if spec == (gate, delta):
            return name
    raise ValueError(f"no member has gate={gate}, delta={delta}")


def sequences(B: int, T: int, cu_seqlens: Optional[torch.Tensor]) -> list[tuple[int, int, int]]:
    """(batch row, first token, length) of every sequence."""
    if cu_seqlens is None:
        return [(b, 0, T) for b in range(B)]
    cu = [int(x) for x in cu_seqlens.tolist()]
    return [(0, cu[n], cu[n + 1] - cu[n]) for n in range(len(cu) - 1)]


def recurrence(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: Optional[torch.Tensor],
    beta: Optional[torch.Tensor],
    *,
    gate: int,
    delta: bool,
    scale: float,
    initial_state: Optional[torch.Tensor] = None,
    cu_seqlens: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (o [B,T,HV,V], final state [N,HV,K,V]) in q's dtype."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    group = HV // H
    dt = q.dtype
    k, v = k.to(dt), v.to(dt)
    outputs = torch.zeros(B, T, HV, V, dtype=dt, device=q.device)
    rows: list[list[torch.Tensor]] = [[outputs[b, t] for t in range(T)] for b in range(B)]
    finals = []
    for n, (b, start, length) in enumerate(sequences(B, T, cu_seqlens)):
        S = (initial_state[n].to(dt) if initial_state is not None else torch.zeros(HV, K, V, dtype=dt, device=q.device))
        for t in range(start, start + length):
            qt = q[b, t].repeat_interleave(group, dim=0)   # [HV, K]
            kt = k[b, t].repeat_interleave(group, dim=0)
            if gate == 1:
                S = torch.exp(g[b, t].to(dt))[:, None, None] * S
            elif gate == 2:
                S = torch.exp(g[b, t].to(dt))[:, :, None] * S
            if delta:
                bt = beta[b, t].to(dt)                         # [HV]
                p = torch.einsum("hk,hkv->hv", bt[:, None] * kt, S)
                u = bt[:, None] * v[b, t] - p
            else:
                u = v[b, t]
            S = S + kt[:, :, None] * u[:, None, :]
            rows[b][t] = scale * torch.einsum("hk,hkv->hv", qt, S)
        finals.append(S)
    o = torch.stack([torch.stack(r) for r in rows]) if T > 0 else outputs
    ht = torch.stack(finals) if finals else torch.zeros(0, HV, K, V, dtype=dt, device=q.device)
    return o, ht


def recurrence_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: Optional[torch.Tensor],
    beta: Optional[torch.Tensor],
    do: torch.Tensor,
    dht: Optional[torch.Tensor],
    *,
    gate: int,
    delta: bool,
    scale: float,
    initial_state: Optional[torch.Tensor] = None,
    cu_seqlens: Optional[torch.Tensor] = None,
) -> dict[str, torch.Tensor]:
    """The exact adjoint of recurrence() for the loss <do, o> + <dht, ht>, token by token from the
    last (the same steps as the float64 oracle in gdn/oracle): {"dq", "dk", "dv"} plus "dg" (with a
    gate), "dbeta" (with the delta term) and "dh0" (with an initial state), in q's dtype."""
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    group = HV // H
    dt = q.dtype
    k, v, do = k.to(dt), v.to(dt), do.to(dt)
    dq = torch.zeros(B, T, HV, K, dtype=dt, device=q.device)
    dk = torch.zeros(B, T, HV, K, dtype=dt, device=q.device)
    dv = torch.zeros(B, T, HV, V, dtype=dt, device=q.device)
    dg = torch.zeros(g.shape, dtype=dt, device=q.device) if gate else None
    dbeta = torch.zeros(B, T, HV, dtype=dt, device=q.device) if delta else None
    dh0 = []
    for n, (b, start, length) in enumerate(sequences(B, T, cu_seqlens)):
        S = (initial_state[n].to(dt) if initial_state is not None else torch.zeros(HV, K, V, dtype=dt, device=q.device))
        steps = []   # per token: (decay [HV,K], Sd, u, S_t)
        for t in range(start, start + length):
            kt = k[b, t].repeat_interleave(group, dim=0)
            if gate == 1:
                decay = torch.exp(g[b, t].to(dt))[:, None].expand(HV, K)
            elif gate == 2:
                decay = torch.exp(g[b, t].to(dt))
            else:
                decay = torch.ones(HV, K, dtype=dt, device=q.device)
            Sd = decay[:, :, None] * S
            if delta:
                bt = beta[b, t].to(dt)
                u = bt[:, None] * v[b, t] - torch.einsum("hk,hkv->hv", bt[:, None] * kt, Sd)
            else:
                u = v[b, t]
            S = Sd + kt[:, :, None] * u[:, None, :]
            steps.append((decay, Sd, u, S))
        dS = dht[n].to(dt) if dht is not None else torch.zeros(HV, K, V, dtype=dt, device=q.device)
        for i in range(length - 1, -1, -1):
            t = start + i
            decay, Sd, u, S_t = steps[i]
            qt = q[b, t].repeat_interleave(group, dim=0)
            kt = k[b, t].repeat_interleave(group, dim=0)
            dS = dS + scale * qt[:, :, None] * do[b, t][:, None, :]
            dq[b, t] = scale * torch.einsum("hkv,hv->hk", S_t, do[b, t])
            du = torch.einsum("hkv,hk->hv", dS, kt)
            dk[b, t] = torch.einsum("hkv,hv->hk", dS, u)
            dSd = dS
            if delta:
                bt = beta[b, t].to(dt)
                dv[b, t] = bt[:, None] * du
                dbk = -torch.einsum("hkv,hv->hk", Sd, du)
                dk[b, t] = dk[b, t] + bt[:, None] * dbk
                dbeta[b, t] = (v[b, t] * du).sum(-1) + (kt * dbk).sum(-1)
                dSd = dS - (bt[:, None] * kt)[:, :, None] * du[:, None, :]
            else:
                dv[b, t] = du
            if gate == 1:
                dg[b, t] = (dSd * Sd).sum((-1, -2))
            elif gate == 2:
                dg[b, t] = (dSd * Sd).sum(-1)
            dS = decay[:, :, None] * dSd
        dh0.append(dS)
    out = {
        "dq": dq.view(B, T, H, group, K).sum(3),
        "dk": dk.view(B, T, H, group, K).sum(3),
        "dv": dv,
    }
    if gate:
        out["dg"] = dg
    if delta:
        out["dbeta"] = dbeta
    if initial_state is not None:
        out["dh0"] = torch.stack(dh0)
    return out
