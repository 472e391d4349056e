"""kcv.gdn's custom ops: the CPU path against a float64 autograd of the token-by-token recurrence,
torch.library.opcheck (schema, fake tensors, autograd registration), and, where a GPU and the
CUDA kernels are present, the sm_90a kernels against the same float64 reference."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
gdn = pytest.importorskip("kcv.gdn")

from kcv.gdn import ops, reference  # noqa: E402

MEMBERS = list(reference.MEMBERS)


def make_inputs(member, *, B=1, T=11, H=1, HV=2, K=4, V=3, dtype=torch.float32, device="cpu", seed=0,
                cu_seqlens=None, initial_state=True):
    gate, delta = reference.MEMBERS[member]
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    x = {
        "q": rnd(B, T, H, K),
        "k": rnd(B, T, H, K) * K ** -0.5,
        "v": rnd(B, T, HV, V),
        "g": None if gate == 0 else -torch.rand(*((B, T, HV) if gate == 1 else (B, T, HV, K)), generator=gen,
                                                dtype=torch.float64),
        "beta": torch.rand(B, T, HV, generator=gen, dtype=torch.float64) if delta else None,
        "h0": rnd(B if cu_seqlens is None else len(cu_seqlens) - 1, HV, K, V) if initial_state else None,
    }
    # Round through the kernel dtype so the float64 reference sees exactly the kernel's inputs.
    for name in ("q", "k", "v", "beta"):
        if x[name] is not None:
            x[name] = x[name].to(dtype).to(torch.float64)
    return {n: (None if t is None else t.to(device)) for n, t in x.items()}


def run_op(member, x, dtype, cu_seqlens=None, keep_preparation=None):
    """The public function on copies in the kernel dtypes, with gradients enabled."""
    leaf = {}
    for name, t in x.items():
        if t is None:
            leaf[name] = None
            continue
        kind = dtype if name in ("q", "k", "v", "beta") else torch.float32
        leaf[name] = t.to(kind).detach().requires_grad_(True)
    o, ht = gdn.recurrence(leaf["q"], leaf["k"], leaf["v"], leaf["g"], leaf["beta"], member=member,
                           initial_state=leaf["h0"], output_final_state=True, cu_seqlens=cu_seqlens,
                           keep_preparation=keep_preparation)
    return leaf, o, ht


def reference_grads(member, x, do, dht, cu_seqlens=None):
    gate, delta = reference.MEMBERS[member]
    leaf = {n: (None if t is None else t.detach().clone().requires_grad_(True)) for n, t in x.items()}
    o, ht = reference.recurrence(leaf["q"], leaf["k"], leaf["v"], leaf["g"], leaf["beta"], gate=gate, delta=delta,
                                 scale=x["q"].shape[-1] ** -0.5, initial_state=leaf["h0"], cu_seqlens=cu_seqlens)
    (o * do).sum().add((ht * dht).sum()).backward()
    return o.detach(), ht.detach(), {n: t.grad for n, t in leaf.items() if t is not None}


def assert_close(name, got, want, rtol):
    got, want = got.double().cpu(), want.double().cpu()
    scale = want.abs().max().item()
    assert scale > 0, f"{name}: the reference is all zero, the comparison proves nothing"
    err = (got - want).abs().max().item()
    assert err <= rtol * scale, f"{name}: max error {err:.3e} > {rtol:.1e} x {scale:.3e}"


@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("varlen", [False, True])
def test_cpu_op_and_its_gradients_match_float64_autograd(member, varlen):
    cu = torch.tensor([0, 1, 5, 11]) if varlen else None
    x = make_inputs(member, seed=3, cu_seqlens=cu.tolist() if varlen else None, B=1)
    gen = torch.Generator().manual_seed(4)
    leaf, o, ht = run_op(member, x, torch.float32, cu)
    do = torch.randn(o.shape, generator=gen, dtype=torch.float64)
    dht = torch.randn(ht.shape, generator=gen, dtype=torch.float64)
    (o.double() * do).sum().add((ht.double() * dht).sum()).backward()
    ro, rht, rgrads = reference_grads(member, x, do, dht, cu)
    assert_close("o", o.detach(), ro, 1e-5)
    assert_close("ht", ht.detach(), rht, 1e-5)
    for name, want in rgrads.items():
        assert_close(f"d{name}", leaf[name].grad, want, 1e-4)


@pytest.mark.parametrize("keep", [False, True])
def test_opcheck_forward_and_backward(keep):
    x = make_inputs("kda", seed=5)
    args = (x["q"].float(), x["k"].float(), x["v"].float(), x["g"].float(), x["beta"].float(), x["h0"].float(), None,
            2, True, 0.5, keep)
    torch.library.opcheck(ops.forward_op, args, test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))
    # The CPU path has no chunks to prepare: what it keeps is empty, whatever `keep` says.
    o, ht, prepared = ops.forward_op(*args)
    assert prepared.dtype == torch.uint8 and prepared.numel() == 0
    do = torch.randn(1, 11, 2, 3)
    bargs = args[:7] + (do, None, prepared, 2, True, 0.5)
    torch.library.opcheck(ops.backward_op, bargs, test_utils=("test_schema", "test_faketensor"))


def test_signature_errors_are_clear():
    x = make_inputs("gdn")
    with pytest.raises(ValueError, match="needs beta"):
        gdn.chunk_gated_delta_rule(x["q"].float(), x["k"].float(), x["v"].float(), x["g"].float())
    with pytest.raises(ValueError, match="multiple of H"):
        gdn.chunk_linear_attn(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match="unknown member"):
        gdn.recurrence(x["q"], x["k"], x["v"], member="mamba")


def test_member_functions_take_fla_style_arguments():
    x = make_inputs("gla", seed=6)
    o1, _ = gdn.chunk_gla(x["q"].float(), x["k"].float(), x["v"].float(), x["g"].float(), scale=0.3)
    o2, _ = gdn.chunk_gla(x["q"].float(), x["k"].float(), x["v"].float(), g=x["g"].float(), scale=0.3)
    assert torch.equal(o1, o2) and o1.abs().sum() > 0


def test_cuda_params_carry_cu_seqlens_as_a_device_pointer_and_a_host_length():
    """make_params (no launch): N comes from the tensor's length, the offsets stay where they are."""
    from kcv.gdn import _library

    x = make_inputs("kda", T=11, seed=12, cu_seqlens=[0, 1, 1, 5, 11])
    cu = torch.tensor([0, 1, 1, 5, 11], dtype=torch.int64)
    args = (x["q"].float(), x["k"].float(), x["v"].float(), x["g"].float(), x["beta"].float(), x["h0"].float())
    p = _library.make_params(*args, cu, 2, True, 0.5)
    assert (p.B, p.T, p.N) == (1, 11, 4)
    assert p.cu_seqlens == cu.data_ptr()
    p = _library.make_params(*args, None, 2, True, 0.5)
    assert (p.N, p.cu_seqlens) == (1, None)
    for bad, why in [(cu.to(torch.int32), "int64"), (cu.view(1, 5), "1-D"), (cu[:1], "two offsets"),
                     (torch.zeros(5, dtype=torch.int64, device="meta"), "is on meta"),
                     (torch.tensor([0, 0, 1, 1, 5, 5, 11, 11])[::2], "contiguous")]:
        with pytest.raises(ValueError, match=why):
            _library.make_params(*args, bad, 2, True, 0.5)
    with pytest.raises(ValueError, match="B = 1"):
        batched = torch.zeros(2, 3, 1, 4)
        _library.make_params(batched, batched, torch.zeros(2, 3, 2, 3), None, None, None, cu, 0, False, 0.5)


@pytest.mark.parametrize("cu", [[1, 5, 11], [0, 5, 3, 11], [0, 5, 10], [0, 5, 12]])
def test_cu_seqlens_on_the_host_are_checked_before_any_kernel(cu):
    x = make_inputs("gdn", T=11)
    with pytest.raises(ValueError, match="non-decreasing from 0 to T = 11"):
        gdn.chunk_gated_delta_rule(x["q"].float(), x["k"].float(), x["v"].float(), x["g"].float(),
                                   x["beta"].float(), cu_seqlens=torch.tensor(cu))


def test_int32_cu_seqlens_are_accepted_and_match_int64():
    x = make_inputs("gla", T=11, seed=13, cu_seqlens=[0, 4, 4, 11])
    args = (x["q"].float(), x["k"].float(), x["v"].float(), x["g"].float())
    o32, h32 = gdn.chunk_gla(*args, initial_state=x["h0"].float(), output_final_state=True,
                             cu_seqlens=torch.tensor([0, 4, 4, 11], dtype=torch.int32))
    o64, h64 = gdn.chunk_gla(*args, initial_state=x["h0"].float(), output_final_state=True,
                             cu_seqlens=torch.tensor([0, 4, 4, 11]))
    assert torch.equal(o32, o64) and torch.equal(h32, h64) and o64.abs().sum() > 0


cuda = pytest.mark.skipif(not (torch.cuda.is_available() and gdn.cuda_kernels_available()),
                          reason="needs a CUDA device and the sm_90a kernels (libkcv_gdn_cuda.so)")


@cuda
@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cuda_kernels_match_float64_reference(member, dtype):
    cu = torch.tensor([0, 1, 63, 64, 65, 200], device="cuda")
    x = make_inputs(member, B=1, T=200, H=2, HV=4, K=64, V=64, dtype=dtype, seed=9, cu_seqlens=cu.tolist())
    xd = {n: (None if t is None else t.cuda()) for n, t in x.items()}
    gen = torch.Generator().manual_seed(10)
    leaf, o, ht = run_op(member, xd, dtype, cu)
    do = torch.randn(o.shape, generator=gen, dtype=torch.float64)
    dht = torch.randn(ht.shape, generator=gen, dtype=torch.float64)
    torch.autograd.backward([o, ht], [do.to(o.dtype).cuda(), dht.float().cuda()])
    ro, rht, rgrads = reference_grads(member, x, do.to(dtype).double(), dht.float().double(), cu.cpu())
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    assert_close("o", o.detach(), ro, tol)
    assert_close("ht", ht.detach(), rht, tol)
    for name, want in rgrads.items():
        assert_close(f"d{name}", leaf[name].grad, want, tol)


@cuda
def test_cuda_kernels_are_bitwise_deterministic():
    x = make_inputs("kda", B=2, T=300, H=1, HV=2, K=128, V=128, dtype=torch.bfloat16, seed=11)
    xd = {n: (None if t is None else t.cuda()) for n, t in x.items()}
    results = []
    for _ in range(2):
        leaf, o, ht = run_op("kda", xd, torch.bfloat16)
        (o.float().square().sum() + ht.sum()).backward()
        results.append([o.detach(), ht.detach()] + [leaf[n].grad for n in ("q", "k", "v", "g", "beta", "h0")])
    for a, b in zip(*results):
        assert torch.equal(a, b)


@cuda
@pytest.mark.parametrize("member", MEMBERS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cuda_kept_preparation_gives_the_bits_of_a_recomputed_one(member, dtype):
    """A backward reading the forward's kept chunk preparation, against one preparing the chunks
    again: every gradient bit for bit, and the kept buffer the size the library asks for."""
    from kcv.gdn import _library

    cu_list = [0, 1, 63, 64, 65, 200]
    cu = torch.tensor(cu_list, device="cuda")
    x = make_inputs(member, B=1, T=200, H=2, HV=4, K=64, V=64, dtype=dtype, seed=18, cu_seqlens=cu_list)
    xd = {n: (None if t is None else t.cuda()) for n, t in x.items()}
    gen = torch.Generator().manual_seed(19)
    do = torch.randn(1, 200, 4, 64, generator=gen).to(dtype).cuda()
    dht = torch.randn(len(cu_list) - 1, 4, 64, 64, generator=gen).cuda()
    runs = []
    for keep in (True, False):
        leaf, o, ht = run_op(member, xd, dtype, cu, keep_preparation=keep)
        saved = [t for t in o.grad_fn.saved_tensors if t is not None and t.dtype == torch.uint8]
        want = _library.prepared_bytes(1, 200, 2, 4, 64, 64, len(cu_list) - 1, *reference.MEMBERS[member]) if keep else 0
        assert [t.numel() for t in saved] == [want] and (want > 0) == keep
        torch.autograd.backward([o, ht], [do, dht])
        runs.append([o.detach(), ht.detach()] + [t.grad for t in leaf.values() if t is not None])
    for i, (a, b) in enumerate(zip(*runs)):
        assert torch.equal(a, b), f"output {i} differs with the preparation kept"


# Sequence lengths 1, 0, a full chunk, 65, many short ones, a partial chunk.
_VARLEN_LENGTHS = [1, 0, 64, 65, 2, 3, 1, 7, 0, 5, 50]


def _offsets(lengths):
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return cu


@cuda
@pytest.mark.parametrize("member", MEMBERS)
def test_cuda_varlen_many_short_sequences_match_float64_reference(member):
    cu_list = _offsets(_VARLEN_LENGTHS)
    cu = torch.tensor(cu_list, device="cuda")
    x = make_inputs(member, B=1, T=cu_list[-1], H=1, HV=2, K=64, V=32, seed=14, cu_seqlens=cu_list)
    xd = {n: (None if t is None else t.cuda()) for n, t in x.items()}
    gen = torch.Generator().manual_seed(15)
    leaf, o, ht = run_op(member, xd, torch.float32, cu)
    do = torch.randn(o.shape, generator=gen, dtype=torch.float64)
    dht = torch.randn(ht.shape, generator=gen, dtype=torch.float64)
    torch.autograd.backward([o, ht], [do.float().cuda(), dht.float().cuda()])
    ro, rht, rgrads = reference_grads(member, x, do, dht, cu.cpu())
    assert_close("o", o.detach(), ro, 1e-4)
    assert_close("ht", ht.detach(), rht, 1e-4)
    for name, want in rgrads.items():
        assert_close(f"d{name}", leaf[name].grad, want, 1e-4)


@cuda
@pytest.mark.parametrize("member", MEMBERS)
def test_cuda_varlen_equals_each_sequence_alone_bitwise(member):
    """A sequence's outputs and gradients do not depend on its neighbours in the batch."""
    cu_list = _offsets(_VARLEN_LENGTHS)
    x = make_inputs(member, B=1, T=cu_list[-1], H=1, HV=2, K=64, V=32, dtype=torch.bfloat16, seed=16,
                    cu_seqlens=cu_list)
    xd = {n: (None if t is None else t.cuda()) for n, t in x.items()}
    gen = torch.Generator().manual_seed(17)
    do = torch.randn(1, cu_list[-1], 2, 32, generator=gen).to(torch.bfloat16).cuda()
    dht = torch.randn(len(cu_list) - 1, 2, 64, 32, generator=gen).cuda()
    leaf, o, ht = run_op(member, xd, torch.bfloat16, torch.tensor(cu_list, device="cuda"))
    torch.autograd.backward([o, ht], [do, dht])
    for n, (b, e) in enumerate(zip(cu_list, cu_list[1:])):
        one = {name: (None if t is None else (t[n:n + 1] if name == "h0" else t[:, b:e])) for name, t in xd.items()}
        leaf1, o1, ht1 = run_op(member, one, torch.bfloat16)
        torch.autograd.backward([o1, ht1], [do[:, b:e], dht[n:n + 1]])
        assert torch.equal(o1, o[:, b:e]) and torch.equal(ht1, ht[n:n + 1]), f"sequence {n} ({b}, {e})"
        for name, t in leaf1.items():
            if t is None:
                continue
            whole = leaf[name].grad
            part = whole[n:n + 1] if name == "h0" else whole[:, b:e]
            assert torch.equal(t.grad, part), f"d{name} of sequence {n} ({b}, {e})"
