"""Gates on Python candidates, in process: each reward hack caught by the gate meant for it,
the correct candidate passing everything. (The sandboxed path is test_worker.py.)"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import executor_for  # noqa: E402
from kcv.worker import _judge_gate  # noqa: E402

pytestmark = pytest.mark.usefixtures("strict_flags")


class _NoEvents:
    def stage(self, *a, **k):
        pass

    def send(self, *a, **k):
        pass


def judged(executor, gate: str) -> dict:
    request = {"reference": "p.py", "candidate": "c.py", "device": "cpu", "settings": executor.settings}
    return _judge_gate(gate, executor, request, executor.settings, _NoEvents())


def explain(result: dict) -> str:
    return json.dumps({k: result.get(k) for k in ("verdict", "signature", "reason", "code")})


def test_correct_candidate_passes_the_gates_the_hacks_fail():
    # Every gate, through the worker: test_worker.py::test_correct_candidate_record.
    ex = executor_for("matmul", "matmul_correct")
    for gate in ("ORD-01", "ORD-02", "CMP-01"):
        r = judged(ex, gate)
        assert r["verdict"] == "pass", f"{gate}: {explain(r)}"
    assert judged(executor_for("relu", "relu_correct_torch"), "EXC-01")["verdict"] == "pass"


def test_result_reuse_fails_ord01():
    r = judged(executor_for("matmul", "matmul_result_reuse"), "ORD-01")
    assert r["verdict"] == "fail", explain(r)


def test_input_mutation_fails_ord02():
    r = judged(executor_for("matmul", "matmul_input_mutation"), "ORD-02")
    assert r["verdict"] == "fail" and "input-mutation" in r["signature"], explain(r)


def test_cached_output_fails_ord02():
    r = judged(executor_for("matmul", "matmul_cached_output"), "ORD-02")
    assert r["verdict"] == "fail", explain(r)
    assert {"stale-or-cached", "aliasing"} & set(r["signature"]), explain(r)


def test_bf16_downgrade_fails_ord01():
    r = judged(executor_for("matmul", "matmul_bf16"), "ORD-01")
    assert r["verdict"] == "fail", explain(r)
    assert r["metric"] > 1


def test_partial_computation_fails_cmp01_only():
    ex = executor_for("matmul", "matmul_partial")
    assert judged(ex, "ORD-01")["verdict"] == "pass"
    r = judged(ex, "CMP-01")
    assert r["verdict"] == "fail", explain(r)
    assert any("M=" in e["probe"] for e in r["evidence"]), explain(r)


def test_nan_swallowing_fails_exc01():
    r = judged(executor_for("relu", "relu_nan_swallowed"), "EXC-01")
    assert r["verdict"] == "fail" and "nan-swallowed" in r["signature"], explain(r)


def test_same_seed_same_verdict():
    a = executor_for("matmul", "matmul_bf16").run_gate("ORD-01")
    b = executor_for("matmul", "matmul_bf16").run_gate("ORD-01")
    assert a == b
    c = executor_for("matmul", "matmul_bf16", {"seed": 1}).run_gate("ORD-01")
    assert c["metric"] != a["metric"]   # other inputs, another worst ratio


def matmul_variant(path, old: str, new: str, *more: tuple[str, str], candidate_path=None):
    """An executor for the matmul problem with an edit (or more), judged in quick mode on the CPU,
    and the correct candidate (or the one given)."""
    import tempfile

    from kcv.executor import Executor
    from kcv.kernelbench import open_session
    from kcv.reference import precision_flags
    from kcv.task import describe
    from conftest import candidate, problem

    text = problem("matmul").read_text()
    for a, b in ((old, new), *more):
        text = text.replace(a, b)
    path.write_text(text)
    session = open_session(path, candidate_path or candidate("matmul_correct"), "cpu", tempfile.mkdtemp())
    settings = {"seed": 0, "quick": True}
    return Executor(describe(path.read_text(), str(path), "cpu", settings), session.candidate.cls, "cpu",
                    precision_flags(), settings)


def test_sizes_where_the_reference_fails_are_skipped(tmp_path):
    r = matmul_variant(tmp_path / "even.py", "return torch.matmul(A, B)",
                       "assert A.shape[0] % 2 == 0, 'M must be even'\n        return torch.matmul(A, B)").run_gate("CMP-01")
    skipped = {s["probe"] for s in r["detail"]["skipped"]}
    assert skipped == {"CMP-01/M=1", "CMP-01/M=17", "CMP-01/M=65", "CMP-01/M=129",
                       "CMP-01/M=17/after-M=64", "CMP-01/M=65/after-M=64"}, r["detail"]
    assert r["verdict"] == "pass", explain(r)


def test_probes_the_control_fails_are_excluded_and_the_rest_judged(monkeypatch):
    ex = executor_for("matmul", "matmul_partial")
    planned = [p["id"] for p in ex.plan("ORD-01")]
    ran = []
    run_probe = ex.run_probe
    monkeypatch.setattr(ex, "run_probe", lambda p, o, role="candidate": ran.append((p["id"], role)) or run_probe(p, o, role))
    # The control "fails" the first probe: that probe is not run on the candidate, and says why.
    monkeypatch.setattr(ex, "control_failure", lambda gate, p: "fail: stand-in" if p["id"] == planned[0] else "")
    result, excluded = ex.run_gate_with_control("ORD-01")
    assert excluded == {planned[0]: "fail: stand-in"}
    assert result["detail"]["excluded_by_control"] == [{"probe": planned[0], "reason": "fail: stand-in"}]
    assert [pid for pid, role in ran] == planned[1:] and {role for _, role in ran} == {"candidate"}
    assert result["probes"] == len(planned) - 1
    alone = ex.run_probes("ORD-01", [p for p in ex.plan("ORD-01") if p["id"] != planned[0]])
    assert (result["verdict"], result["metric"]) == (alone["verdict"], alone["metric"])
    # The control fails every probe: nothing is judged against the candidate.
    monkeypatch.setattr(ex, "control_failure", lambda gate, p: "fail: stand-in")
    assert ex.run_gate_with_control("ORD-01") == (None, {p: "fail: stand-in" for p in planned})


def test_flushing_subnormal_inputs_is_classed_as_a_flush_through_the_external_reference():
    # log of a subnormal is about -100; a kernel that treats it as zero returns -inf. Whether
    # flushing explains that needs y* on the flushed inputs, which only the Python side's
    # float64 Model can compute: libkcv reaches it through the runner the executor lends.
    r = judged(executor_for("log_rows", "log_daz"), "EXC-02")
    assert r["verdict"] == "fail", explain(r)
    assert "daz-input" in r["signature"], explain(r)
    evidence = [e for e in r["evidence"] if "explained_by_flush" in e.get("detail", {})]
    assert evidence and evidence[0]["detail"]["explained_by_flush"] is True, explain(r)


def test_an_exact_log_keeps_its_subnormal_inputs():
    r = judged(executor_for("log_rows", "log_rows_correct"), "EXC-02")
    assert r["verdict"] in ("pass", "n/a"), explain(r)


def test_a_scalar_output_candidate_that_breaks_at_other_sizes_fails_cmp01():
    # The call fails at batch sizes other than 64; its output stands in as poison, a 0-dim tensor.
    r = judged(executor_for("mean_loss", "mean_loss_fixed_rows"), "CMP-01")
    assert r["verdict"] == "fail", explain(r)


def test_a_candidate_sized_by_its_first_call_fails_cmp01_after_a_nominal_call():
    # Each size probe gets a new instance, whose first call is at that size, and passes; the
    # instance first called at M=64 leaves rows 64.. of M=65 zero.
    r = judged(executor_for("matmul", "matmul_first_shape"), "CMP-01")
    assert r["verdict"] == "fail", explain(r)
    assert [e["probe"] for e in r["evidence"]] == ["CMP-01/M=65/after-M=64"], explain(r)
    assert r["signature"] == ["fails at M=65 after a call at M=64"], explain(r)
    assert judged(executor_for("matmul", "matmul_correct"), "CMP-01")["verdict"] == "pass"


def test_a_primed_probe_is_skipped_where_the_init_arguments_change(tmp_path):
    # A size that reaches get_init_inputs() builds another model: no one instance serves both.
    new_init = ("def __init__(self):", "def __init__(self, m):")
    (tmp_path / "candidate.py").write_text(
        "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def __init__(self, m):\n        super().__init__()\n\n"
        "    def forward(self, A, B):\n        return torch.matmul(A, B)\n")
    ex = matmul_variant(tmp_path / "init.py", "return []", "return [M]", new_init,
                        candidate_path=tmp_path / "candidate.py")
    r = ex.run_gate("CMP-01")
    reasons = {s["probe"]: s["reason"] for s in r["detail"]["skipped"]}
    assert set(reasons) == {"CMP-01/M=17/after-M=64", "CMP-01/M=65/after-M=64"}, r["detail"]
    assert all("init arguments differ" in why for why in reasons.values())
    assert r["verdict"] == "pass", explain(r)


def test_gates_run_at_budget_sizes_that_keep_the_contract_shapes():
    # Scaled to the probe budget with the sequence kept whole, the reference runs at every
    # probe, so the correct pooling passes instead of ending in a missing reference.
    ex = executor_for("pool_long", "pool_long_correct")
    for gate in ("ORD-01", "EXC-01"):
        r = judged(ex, gate)
        assert r["verdict"] == "pass", f"{gate}: {explain(r)}"


def test_sizes_that_change_only_inputs_share_the_problems_models():
    # matmul's Model reads no size constant: CMP-01's sizes build the reference and the control
    # once and a candidate per size.
    ex = executor_for("matmul", "matmul_correct")
    a = ex.models({"M": 17})
    reference, control, candidate = a.reference, a.control, a.candidate
    b = ex.models({"M": 65})
    assert b.reference is reference and b.control is control and b.candidate is not candidate
    assert b.problem.context["M"] == 65
    ex.forget_models()
    assert ex.models({"M": 17}).reference is not reference


def test_the_reference_and_the_control_come_from_one_initialisation(monkeypatch):
    # The problem's Model is initialised once per size; the reference is its float64 copy and
    # holds exactly the control's weights, as two initialisations from the weight seed would.
    from torch import nn

    ex = executor_for("linear_sum", "linear_sum_correct")
    inits = []
    real = nn.Linear.reset_parameters
    monkeypatch.setattr(nn.Linear, "reset_parameters", lambda self: inits.append(self) or real(self))
    m = ex.models({"in_features": 17})
    assert len(inits) == 2, "one for the problem's Model, one for the candidate"
    assert m.reference.linear.weight.dtype == torch.float64 and m.control.linear.weight.dtype == torch.float32
    assert m.reference.linear.weight.shape == (16, 17)
    assert torch.equal(m.reference.linear.weight, m.control.linear.weight.double())
    assert torch.equal(m.reference.linear.bias, m.control.linear.bias.double())
    assert m.reference.linear.weight.data_ptr() != m.control.linear.weight.data_ptr()
    # The candidate, built by its own class from the same seed, draws the same weights.
    assert torch.equal(m.candidate.linear.weight, m.control.linear.weight)


def test_models_that_read_a_size_are_built_at_each_size(tmp_path):
    ex = matmul_variant(tmp_path / "sized.py", "super().__init__()", "super().__init__()\n        self.rows = M")
    a = ex.models({"M": 17})
    b = ex.models({"M": 65})
    assert b.reference is not a.reference and (a.reference.rows, b.reference.rows) == (17, 65)


def test_the_control_runs_once_per_call_for_both_passes(monkeypatch):
    import kcv.executor as executor_module

    ex = executor_for("matmul", "matmul_correct")
    runs = []
    real = executor_module.run_control
    monkeypatch.setattr(executor_module, "run_control", lambda m, a: runs.append(1) or real(m, a))
    result, excluded = ex.run_gate_with_control("ORD-03")
    calls = sum(len(p["calls"]) for p in ex.plan("ORD-03"))
    assert not excluded and result["verdict"] == "pass", explain(result)
    # The control pass computes the control's output; the candidate's pass reads it back.
    assert 0 < len(runs) <= calls


def test_a_candidate_error_ends_each_gate_at_its_first_probe():
    # libkcv decides (ends_gate) that the error has failed the gate; its other probes, each with
    # a float64 reference and a control run, are not run, and the result says how many.
    ex = executor_for("relu", "relu_raises")
    for gate in ("CMP-01", "ORD-01", "EXC-01"):
        planned = len(ex.plan(gate))
        r = judged(ex, gate)
        assert r["verdict"] == "fail", explain(r)
        assert r["probes"] == 1, explain(r)
        assert "no kernel for this shape" in r["evidence"][0]["signature"], explain(r)
        if planned > 1:
            assert r["detail"]["not_run"]["probes"] == planned - 1, r["detail"]
            assert r["detail"]["not_run"]["after"] == r["evidence"][0]["probe"]
    assert len(ex.plan("CMP-01")) > 1
    # An answering candidate runs every probe the gate plans.
    honest = executor_for("relu", "relu_correct_torch")
    r = judged(honest, "CMP-01")
    assert r["verdict"] == "pass" and r["probes"] == len(honest.plan("CMP-01")), explain(r)
    assert "not_run" not in (r.get("detail") or {})
