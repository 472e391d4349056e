"""Value families and special values, applied by libkcv to task values (bit-exact checks)."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

from kcv import _core  # noqa: E402

CONTRACT = {
    "contract": {"id": "values-test"},
    "dims": [{"name": "n", "nominal": 8, "free": True}],
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["n"]},
               {"name": "h", "dtype": "bf16", "shape": ["n"]},
               {"name": "i", "dtype": "i64", "shape": ["n"]}],
    "outputs": [{"name": "y", "dtype": "f32", "shape": ["n"], "tolerance": {"model": "envelope"}}],
    "oracle": {"name": "external:test", "controls": ["c"]},
}


@pytest.fixture(scope="module")
def contract():
    return _core.Contract(json.dumps(CONTRACT), "values-test")


def bits(t: torch.Tensor) -> list[int]:
    view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float64: torch.int64}[t.dtype]
    return t.contiguous().view(view).tolist()


def family(kind: str, scale: float = 1.0) -> str:
    return json.dumps({"kind": kind, "scale": scale})


SPECIAL_VALUES = torch.tensor([0.0, -0.0, 1e-45, -1e-40, float("nan"), float("inf"), -float("inf"), 3.0e38, 1.5])


def test_round_trip_through_kcv_is_bit_exact():
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        t = SPECIAL_VALUES.to(dtype)
        back = _core.to_kcv_and_back(t)
        assert back.dtype == dtype and bits(back) == bits(t), dtype
    strided = torch.arange(12.0).reshape(3, 4).t()
    assert torch.equal(_core.to_kcv_and_back(strided), strided.contiguous())
    flags = torch.tensor([True, False, True])
    assert torch.equal(_core.to_kcv_and_back(flags), flags)


def test_task_family_keeps_every_bit(contract):
    out = _core.apply_family(contract, "x", SPECIAL_VALUES, family("task"), 7)
    assert bits(out) == bits(SPECIAL_VALUES)


def test_band_scales_the_task_values(contract):
    x = torch.tensor([1.0, -2.0, 0.0, -0.0, 3.5, 0.25])
    out = _core.apply_family(contract, "x", x, family("band", 1e3), 1)
    assert out.tolist() == [1000.0, -2000.0, 0.0, -0.0, 3500.0, 250.0]
    assert math.copysign(1, out[3].item()) == -1
    big = _core.apply_family(contract, "x", torch.tensor([3.0e35]), family("band", 1e4), 1)
    assert big.item() == float("inf")   # rounded to the input dtype, as a caller's data would be


def test_repeated_repeats_one_task_value_and_keeps_zeros(contract):
    x = torch.tensor([0.0, 5.0, 6.0, 0.0, 7.0, 8.0])
    out = _core.apply_family(contract, "x", x, family("repeated"), 3)
    nonzero = [v for i, v in enumerate(out.tolist()) if i not in (0, 3)]
    assert out[0] == 0 and out[3] == 0 and len(set(nonzero)) == 1 and nonzero[0] in (5.0, 6.0, 7.0, 8.0)


def test_drawn_families_are_seeded_and_keep_structural_zeros(contract):
    x = torch.tensor([0.0, 0.5, 0.25, -0.0] * 16)
    a = _core.apply_family(contract, "x", x, family("signed_normal"), 11)
    b = _core.apply_family(contract, "x", x, family("signed_normal"), 11)
    c = _core.apply_family(contract, "x", x, family("signed_normal"), 12)
    assert bits(a) == bits(b) and bits(a) != bits(c)
    for i in range(0, 64, 4):
        assert bits(a)[i] == 0 and bits(a)[i + 3] == bits(x)[i + 3], i
    assert (a[1::4] < 0).any() and (a[1::4] != 0.5).all()


def test_subnormal_family_gives_subnormals_of_the_input_dtype(contract):
    x = torch.ones(64, dtype=torch.bfloat16)
    out = _core.apply_family(contract, "h", x, family("subnormal"), 5).float()
    tiny = torch.finfo(torch.bfloat16).tiny
    assert ((out != 0) & (out.abs() < tiny)).all(), out


def test_integer_inputs_are_never_changed(contract):
    i = torch.arange(8)
    assert torch.equal(_core.apply_family(contract, "i", i, family("signed_normal"), 1), i)


def test_specials_land_only_where_reported_and_never_on_zeros(contract):
    x = torch.tensor([0.0, 1.0] * 500)
    specials = json.dumps({"pattern": "scattered", "rate": 0.05, "kinds": ["nan", "+inf", "-inf"]})
    out, hit = _core.inject_specials(contract, "x", x, x, specials, 99)
    hit = sorted(hit)
    assert hit, "no special value was injected"
    changed = [i for i in range(len(x)) if bits(out)[i] != bits(x)[i]]
    assert changed == hit
    assert all(i % 2 == 1 for i in hit)
    assert all(not math.isfinite(out[i].item()) for i in hit)
    again, hit2 = _core.inject_specials(contract, "x", x, x, specials, 99)
    assert bits(again) == bits(out) and sorted(hit2) == hit


def test_unknown_input_is_an_error(contract):
    with pytest.raises(KeyError):
        _core.apply_family(contract, "nope", torch.ones(2), family("task"), 0)


def test_content_hash_sees_every_bit():
    a = torch.tensor([0.0, 1.0])
    b = torch.tensor([-0.0, 1.0])
    assert _core.content_hash(a) == _core.content_hash(a.clone())
    assert _core.content_hash(a) != _core.content_hash(b)
