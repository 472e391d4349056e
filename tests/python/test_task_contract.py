"""The contract of an opaque task, and the bridge to libkcv's plan()."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import problem  # noqa: E402
from kcv import _core  # noqa: E402
from kcv.task import describe  # noqa: E402

pytestmark = pytest.mark.usefixtures("strict_flags")


def task_of(name: str, **settings):
    path = problem(name)
    return describe(path.read_text(), str(path), "cpu", settings)


def test_matmul_dims_and_shapes_come_from_the_constants():
    t = task_of("matmul")
    doc = t.document
    assert [(d["name"], d["nominal"], d["free"]) for d in doc["dims"]] == [("M", 64, True), ("K", 256, True),
                                                                          ("N", 48, True)]
    assert [(i["name"], i["dtype"], i["shape"]) for i in doc["inputs"]] == [("A", "f32", ["M", "K"]),
                                                                            ("B", "f32", ["K", "N"])]
    assert [(o["name"], o["dtype"], o["shape"], o["tolerance"]["model"]) for o in doc["outputs"]] == [
        ("output", "f32", ["M", "N"], "envelope")]
    assert t.contract.oracle == "external:kernelbench" and t.contract.external
    assert t.positions == [0, 1]
    assert json.loads(t.contract.json())["oracle"] == {"name": "external:kernelbench", "controls": ["model_fp32"]}


def test_derived_and_non_size_constants():
    t = task_of("linear_sum")
    doc = t.document
    # in_features reaches the input through input_shape = (in_features,): overriding the constant
    # re-derives it. reduce_dim and out_features size no input.
    assert [d["name"] for d in doc["dims"]] == ["batch_size", "in_features"]
    assert doc["inputs"][0]["shape"] == ["batch_size", "in_features"]
    assert doc["outputs"][0]["shape"] == ["batch_size", 1]
    assert t.nominal["out_features"] == 16 and t.nominal["reduce_dim"] == 1


def test_ambiguous_sizes_stay_literal(tmp_path):
    path = tmp_path / "square.py"
    path.write_text(problem("matmul").read_text().replace("M = 64", "M = 48").replace(
        "B = torch.rand(K, N)", "B = torch.rand(K, 2 * N)"))
    t = describe(path.read_text(), str(path), "cpu")
    assert t.document["inputs"][1]["shape"] == ["K", 96]
    assert t.document["inputs"][0]["shape"] == ["M", "K"]
    assert any("N" in note for note in t.notes)


def test_external_contracts_are_validated_otherwise():
    bad = {"contract": {"id": "x"}, "dims": [{"name": "n", "nominal": 4, "free": True}],
           "inputs": [{"name": "x", "dtype": "f32", "shape": ["m"]}],
           "outputs": [{"name": "y", "dtype": "f32", "shape": ["n"], "tolerance": {"model": "envelope"}}],
           "oracle": {"name": "external:kernelbench", "controls": ["model_fp32"]}}
    with pytest.raises(RuntimeError, match="unknown dimension 'm'"):
        _core.Contract(json.dumps(bad), "bad")
    bad["inputs"][0]["shape"] = ["n"]
    bad["oracle"]["name"] = "external:"
    with pytest.raises(RuntimeError, match="runner name"):
        _core.Contract(json.dumps(bad), "bad")
    bad["oracle"]["name"] = "no_such_oracle"
    with pytest.raises(RuntimeError, match="unknown oracle"):
        _core.Contract(json.dumps(bad), "bad")


def test_applicability_for_an_opaque_task():
    c = task_of("matmul").contract
    assert _core.not_applicable("PRC-03", c) != ""
    for gate in ("ORD-01", "ORD-02", "ORD-03", "CMP-01", "CMP-02", "EXC-01", "RES-01"):
        assert _core.not_applicable(gate, c) == "", gate


def test_plan_is_libkcvs_and_seeded():
    c = task_of("matmul").contract
    a = json.loads(_core.plan("ORD-01", c, json.dumps({"seed": 3}), "cpu"))
    b = json.loads(_core.plan("ORD-01", c, json.dumps({"seed": 3}), "cpu"))
    other = json.loads(_core.plan("ORD-01", c, json.dumps({"seed": 4}), "cpu"))
    assert a == b and len(a) >= 5
    assert [p["calls"][0]["input_seed"] for p in a] != [p["calls"][0]["input_seed"] for p in other]
    assert {p["family"]["kind"] for p in a} == {"task", "signed_normal"}


def test_cmp01_sweeps_the_free_constants():
    c = task_of("matmul").contract
    probes = json.loads(_core.plan("CMP-01", c, json.dumps({"quick": True}), "cpu"))
    swept = {(name, v) for p in probes for name, v in p["dims"].items() if v != {"M": 64, "K": 256, "N": 48}[name]}
    assert swept == {(d, v) for d in "MKN" for v in (1, 17, 65, 129)}


def test_cmp02_adds_torch_toggles_gpu_ones_only_on_a_gpu():
    c = task_of("matmul").contract
    cpu = [p["id"] for p in json.loads(_core.plan("CMP-02", c, "{}", "cpu"))]
    gpu = [p["id"] for p in json.loads(_core.plan("CMP-02", c, "{}", "cuda"))]
    assert "CMP-02/torch:tf32" in cpu and "CMP-02/torch:deterministic" in cpu
    assert "CMP-02/torch:cuda-graph" not in cpu and "CMP-02/torch:side-stream" not in cpu
    assert "CMP-02/torch:cuda-graph" in gpu and "CMP-02/torch:side-stream" in gpu
    assert "CMP-02/ftz" in cpu


def test_sizes_over_the_probe_budget_are_halved_largest_first():
    # M, K, N = 64, 256, 48 in f32: 126,976 bytes a call. K halves twice, then M once.
    t = task_of("matmul", probe_budget_bytes=32 << 10)
    assert [(d["name"], d["nominal"]) for d in t.document["dims"]] == [("M", 32), ("K", 64), ("N", 48)]
    assert t.nominal == {"M": 64, "K": 256, "N": 48}
    assert t.document["measurement"]["memory_cap_bytes"] == 16 * (32 << 10)
    assert any("the gates probe at M = 32, K = 64, N = 48" in n and "the standard check runs at the problem's own"
               in n for n in t.notes)
    # Within the budget, nothing changes and nothing is noted.
    t = task_of("matmul")
    assert [d["nominal"] for d in t.document["dims"]] == [64, 256, 48]
    assert not any("budget" in n for n in t.notes)


def test_no_size_is_scaled_below_eight():
    t = task_of("matmul", probe_budget_bytes=1)
    assert [(d["name"], d["nominal"]) for d in t.document["dims"]] == [("M", 8), ("K", 8), ("N", 8)]


def test_a_number_in_the_output_follows_the_probe_sizes():
    # The pooled length is sequence_length - 12, a number in the contract. At the probe sizes the
    # contract holds it as it is there, so the sequence is scaled like any other size, the largest
    # first: 4096 halves four times, and a call of 32 x 16 x 256 inputs and 32 x 16 x 244 outputs
    # in f32 (1,024,000 bytes) fits the 1 MiB budget.
    t = task_of("pool_long")
    assert [o["shape"] for o in t.document["outputs"]] == [["batch_size", "channels", 244]]
    assert [(d["name"], d["nominal"]) for d in t.document["dims"]] == [("batch_size", 32), ("channels", 16),
                                                                      ("sequence_length", 256)]
    assert any("the gates probe at batch_size = 32, channels = 16, sequence_length = 256" in n for n in t.notes)
    # Not below the window's reach: with no budget to speak of, the sequence stops where the
    # pooled length would no longer be positive.
    t = task_of("pool_long", probe_budget_bytes=1)
    seq = next(d["nominal"] for d in t.document["dims"] if d["name"] == "sequence_length")
    assert seq - 12 >= 1 and t.document["outputs"][0]["shape"][2] == seq - 12
