"""The C++ float64 oracle (through kcv._core) against float64 autograd of the token-by-token
recurrence in PyTorch: outputs, final state and every gradient, for each member, with grouped
value heads, varlen sequences, an initial state and a final-state gradient."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
core = pytest.importorskip("kcv._core")
if not hasattr(core, "gdn_oracle_forward"):
    pytest.skip("kcv._core has no recurrence oracle bindings", allow_module_level=True)

from kcv.gdn import oracle, reference  # noqa: E402


@pytest.mark.parametrize("member", list(reference.MEMBERS))
@pytest.mark.parametrize("varlen", [False, True])
def test_oracle_matches_float64_autograd(member, varlen):
    gate, delta = reference.MEMBERS[member]
    gen = torch.Generator().manual_seed(17)
    B, T, H, HV, K, V = (1, 13, 1, 2, 4, 3) if varlen else (2, 9, 2, 4, 3, 2)
    cu = [0, 1, 6, 13] if varlen else None
    N = len(cu) - 1 if varlen else B
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    x = {
        "q": rnd(B, T, H, K), "k": rnd(B, T, H, K) * 0.5, "v": rnd(B, T, HV, V),
        "g": None if gate == 0 else -torch.rand(*((B, T, HV) if gate == 1 else (B, T, HV, K)), generator=gen,
                                                dtype=torch.float64),
        "beta": torch.rand(B, T, HV, generator=gen, dtype=torch.float64) if delta else None,
        "h0": rnd(N, HV, K, V),
    }
    do, dht = rnd(B, T, HV, V), rnd(N, HV, K, V)
    scale = 0.7
    leaf = {n: (None if t is None else t.clone().requires_grad_(True)) for n, t in x.items()}
    o, ht = reference.recurrence(leaf["q"], leaf["k"], leaf["v"], leaf["g"], leaf["beta"], gate=gate, delta=delta,
                                 scale=scale, initial_state=leaf["h0"],
                                 cu_seqlens=None if cu is None else torch.tensor(cu))
    ((o * do).sum() + (ht * dht).sum()).backward()

    fwd = oracle.oracle_forward(member, x["q"], x["k"], x["v"], x["g"], x["beta"], scale=scale,
                                initial_state=x["h0"], cu_seqlens=cu)
    np.testing.assert_allclose(fwd["o"], o.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fwd["ht"], ht.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert (fwd["o_scale"] >= np.abs(fwd["o"]) * (1 - 1e-12)).all() or delta
    bwd = oracle.oracle_backward(member, x["q"], x["k"], x["v"], x["g"], x["beta"], do=do, dht=dht, scale=scale,
                                 initial_state=x["h0"], cu_seqlens=cu)
    names = ["q", "k", "v", "h0"] + (["g"] if gate else []) + (["beta"] if delta else [])
    for n in names:
        want = leaf[n].grad.numpy()
        assert np.abs(want).max() > 1e-3, n
        np.testing.assert_allclose(bwd["d" + n], want, rtol=1e-10, atol=1e-10, err_msg=f"d{n} ({member})")
        assert (bwd["d" + n + "_scale"] >= 0).all()


def test_oracle_rejects_bad_shapes():
    q = np.zeros((1, 4, 1, 2))
    with pytest.raises(ValueError, match="shape"):
        oracle.oracle_forward("linear_attention", q, np.zeros((1, 4, 1, 3)), np.zeros((1, 4, 1, 2)))
    with pytest.raises(ValueError, match="needs g"):
        oracle.oracle_forward("ssd", q, q, q)


@pytest.mark.parametrize("member", ["linear_attention", "gla", "gdn"])
def test_operand_floor_reaches_the_scales(member):
    """The floor a contract with bf16 operands passes the oracle: at normal scale every scale keeps
    its bits; with v and h0 at 2^-140, below bf16's smallest normal, the floored scales bound what
    rounding those operands loses (they grow), while the values themselves never change."""
    gate, delta = reference.MEMBERS[member]
    rng = np.random.default_rng(5)
    B, T, H, HV, K, V = 1, 7, 1, 2, 4, 3
    q, k = rng.standard_normal((B, T, H, K)), rng.standard_normal((B, T, H, K)) * 0.4
    v, h0, do = rng.standard_normal((B, T, HV, V)), rng.standard_normal((B, HV, K, V)), rng.standard_normal((B, T, HV, V))
    g = None if gate == 0 else -rng.random((B, T, HV) if gate == 1 else (B, T, HV, K))
    beta = rng.random((B, T, HV)) if delta else None
    floor = 2.0 ** -126
    for shrink in (1.0, 2.0 ** -140):
        args = dict(scale=0.5, initial_state=h0 * shrink)
        plain = oracle.oracle_forward(member, q, k, v * shrink, g, beta, **args)
        floored = oracle.oracle_forward(member, q, k, v * shrink, g, beta, operand_floor=floor, **args)
        bplain = oracle.oracle_backward(member, q, k, v * shrink, g, beta, do=do, **args)
        bfloored = oracle.oracle_backward(member, q, k, v * shrink, g, beta, do=do, operand_floor=floor, **args)
        for a, b in ((plain, floored), (bplain, bfloored)):
            for name in a:
                if shrink == 1.0 or not name.endswith("_scale"):
                    np.testing.assert_array_equal(a[name], b[name], err_msg=name)
                else:
                    assert (b[name] >= a[name]).all(), name
        if shrink != 1.0:
            assert (floored["o_scale"] > plain["o_scale"]).any()
            assert (floored["ht_scale"] > 2 * plain["ht_scale"]).any()
            assert (bfloored["dq_scale"] > bplain["dq_scale"]).any()
