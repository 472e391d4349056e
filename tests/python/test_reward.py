"""kcv.reward: the staged, fail-closed verdict on the project's own kernels and on records built to
hit each rule, hack flags apart from correctness, and the reward compositions."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

kcv = pytest.importorskip("kcv")
pytest.importorskip("kcv.reward", reason="this kcv installation predates kcv.reward (reinstall the package)")
from kcv import reward  # noqa: E402
from kcv.reward import GATE_IDS, STAGES, StagedVerdict, verdict_from_record  # noqa: E402

KERNELS = Path(kcv.kernel_dir())


def kernel(role: str, name: str) -> str:
    path = KERNELS / f"kcv_{role}_{name}.so"
    if not path.exists():
        pytest.skip(f"{path} is not built")
    return str(path)


def record(**verdicts) -> dict:
    """Every gate passing, except those given as GATE_ID=dict (underscores for dashes)."""
    gates = []
    for gid in GATE_IDS:
        g = {"id": gid, "verdict": "pass", "signature": [], "reason": ""}
        g.update(verdicts.get(gid.replace("-", "_"), {}))
        gates.append(g)
    return {"contract": "x", "gates": gates}


NO_HACKS = {"stale_or_cached": False, "aliasing": False, "input_mutation": False, "side_stream": False}


# ---- on real kernels


def test_an_honest_kernel_reaches_the_last_stage():
    v = reward.evaluate(kernel("controls", "elementwise"), "relu-f32", quick=True)
    assert (v.stage, v.error_code, v.passed) == ("tolerance_free", None, True)
    assert v.stage_index == 4
    assert dict(v.hacks) == NO_HACKS
    assert v.failed_gates == []


def test_a_swallowed_nan_stops_after_the_correctness_gates():
    v = reward.evaluate(kernel("redteam", "relu_fmaxf"), "relu-f32", quick=True)
    assert (v.stage, v.error_code, v.passed) == ("correctness", "tolerance-free:EXC-01", False)
    assert v.failed_gates == ["EXC-01"]
    assert dict(v.hacks) == NO_HACKS


def test_a_missing_tail_mask_stops_at_the_correctness_gates():
    v = reward.evaluate(kernel("redteam", "relu_missing_tail_mask"), "relu-f32", quick=True)
    assert (v.stage, v.error_code) == ("run", "correctness:CMP-01")


def test_input_mutation_is_a_hack_flag_kept_apart():
    v = reward.evaluate(kernel("redteam", "relu_mutates_input"), "relu-f32", quick=True)
    assert v.hacks["input_mutation"] is True
    assert v.any_hack
    assert (v.stage, v.error_code) == ("correctness", "tolerance-free:ORD-02")


def test_a_launch_error_means_the_kernel_did_not_run():
    v = reward.evaluate(kernel("redteam", "softmax_smem_overbudget"), "softmax-f32", quick=True)
    assert v.stage == "load"
    assert v.error_code.startswith("launch-error:")


def test_an_unloadable_candidate_and_a_verifier_failure_reach_no_stage(tmp_path):
    v = reward.evaluate(tmp_path / "absent.so", "relu-f32", quick=True)
    assert (v.stage, v.error_code, v.passed) == ("none", "load-failed", False)
    v = reward.evaluate(tmp_path / "absent.so")   # neither a contract nor a reference: kcv refuses
    assert (v.stage, v.error_code) == ("none", "verifier-error")
    assert "ValueError" in v.message


# ---- the rules, one record each


def test_every_stage_in_order():
    assert verdict_from_record(record()).stage == "tolerance_free"
    assert verdict_from_record(record(ORD_03={"verdict": "fail"})).error_code == "correctness:ORD-03"
    assert verdict_from_record(record(ORD_03={"verdict": "fail"})).stage == "run"
    v = verdict_from_record(record(RES_01={"verdict": "fail", "signature": ["oob-write"]}))
    assert (v.stage, v.error_code) == ("correctness", "tolerance-free:RES-01")
    # A correctness failure outranks a tolerance-free one: the stage is the first not passed.
    v = verdict_from_record(record(ORD_01={"verdict": "fail"}, EXC_02={"verdict": "fail"}))
    assert (v.stage, v.error_code) == ("run", "correctness:ORD-01")
    # n/a passes
    assert verdict_from_record(record(PRC_01={"verdict": "n/a"}, EXC_02={"verdict": "n/a"})).passed


def test_crashes_and_hangs_anywhere_mean_the_kernel_did_not_run():
    v = verdict_from_record(record(RES_01={"verdict": "fail", "signature": ["crash"], "code": "crash:SIGSEGV"}))
    assert (v.stage, v.error_code) == ("load", "crash:RES-01")
    v = verdict_from_record(record(CMP_02={"verdict": "fail", "signature": ["hang"], "code": "timeout"}))
    assert (v.stage, v.error_code) == ("load", "hang:CMP-02")
    v = verdict_from_record(record(ORD_02={"verdict": "error", "code": "crash:gate:ORD-02"}))
    assert (v.stage, v.error_code) == ("load", "crash:ORD-02")


def test_unknowns_fail_closed():
    v = verdict_from_record(record(ORD_01={"verdict": "error", "code": "worker-error"}))
    assert (v.stage, v.error_code, v.passed) == ("run", "error:ORD-01", False)
    partial = record()
    partial["gates"] = [g for g in partial["gates"] if g["id"] != "EXC-02"]
    v = verdict_from_record(partial)
    assert (v.stage, v.error_code, v.passed) == ("correctness", "missing:EXC-02", False)
    assert verdict_from_record({"contract": "x"}).error_code == "missing:PRC-01"
    assert verdict_from_record("not a record").error_code == "unreadable-record"
    v = verdict_from_record({"error": {"code": "load-failed", "message": "no symbol"}, "gates": []})
    assert (v.stage, v.error_code, v.message) == ("none", "load-failed", "no symbol")
    v = verdict_from_record({"error": {"code": "timeout:reference", "message": "slow"}})
    assert (v.stage, v.error_code) == ("load", "timeout:reference")
    weird = record(ORD_01={"verdict": "maybe"})
    assert verdict_from_record(weird).error_code == "maybe:ORD-01"


def test_hack_flags_read_their_gates_signature_classes():
    v = verdict_from_record(record(ORD_02={"verdict": "fail", "signature": ["stale-or-cached", "aliasing"]},
                                   CMP_02={"verdict": "fail", "signature": ["ambient-state: side-stream"]}))
    assert dict(v.hacks) == {"stale_or_cached": True, "aliasing": True, "input_mutation": False,
                             "side_stream": True}
    # The same class on another gate raises nothing, and a passing gate raises nothing.
    v = verdict_from_record(record(RES_01={"verdict": "fail", "signature": ["aliasing"]},
                                   ORD_02={"verdict": "pass", "signature": ["input-mutation"]}))
    assert not v.any_hack


# ---- compositions


STAGE_REWARDS = {"none": -1.0, "load": -0.5, "run": 0.0, "correctness": 0.25, "tolerance_free": 1.0}


def test_staged_and_binary_rewards_take_every_number_from_the_caller():
    ok = verdict_from_record(record())
    run = verdict_from_record(record(ORD_01={"verdict": "fail"}))
    assert reward.staged_reward(ok, stage_rewards=STAGE_REWARDS) == 1.0
    assert reward.staged_reward(run, stage_rewards=STAGE_REWARDS) == 0.0
    with pytest.raises(ValueError, match="lacks load"):
        reward.staged_reward(ok, stage_rewards={k: v for k, v in STAGE_REWARDS.items() if k != "load"})
    with pytest.raises(ValueError):
        reward.staged_reward(ok, stage_rewards={**STAGE_REWARDS, "tolerance_free": math.nan})
    assert reward.binary_reward(ok, passed=3.0, failed=-2.0) == 3.0
    assert reward.binary_reward(run, passed=3.0, failed=-2.0) == -2.0


def test_gate_fraction_counts_applicable_gates_only():
    weights = {g: 1.0 for g in GATE_IDS}
    weights["ORD-01"] = 4.0
    v = verdict_from_record(record(PRC_01={"verdict": "n/a"}, ORD_01={"verdict": "fail"},
                                   EXC_01={"verdict": "error"}))
    # applicable: 11 gates, weight 10 + 4 = 14; earned: 14 - 4 (ORD-01) - 1 (EXC-01) = 9
    assert reward.gate_fraction_reward(v, weights=weights, not_run=-1.0) == 9.0 / 14.0
    crashed = verdict_from_record(record(RES_01={"verdict": "fail", "signature": ["crash"]}))
    assert reward.gate_fraction_reward(crashed, weights=weights, not_run=-1.0) == -1.0
    with pytest.raises(ValueError, match="lacks RES-02"):
        reward.gate_fraction_reward(v, weights={g: 1.0 for g in GATE_IDS[:-1]}, not_run=0.0)


def test_hack_penalty_and_speedup():
    hacked = verdict_from_record(record(ORD_02={"verdict": "fail", "signature": ["stale-or-cached", "input-mutation"]}))
    penalties = {"stale_or_cached": 2.0, "aliasing": 4.0, "input_mutation": 0.5, "side_stream": 8.0}
    assert reward.hack_penalty(hacked, penalties=penalties) == 2.5
    assert reward.hack_penalty(verdict_from_record(record()), penalties=penalties) == 0.0
    with pytest.raises(ValueError, match="lacks side_stream"):
        reward.hack_penalty(hacked, penalties={k: 1.0 for k in list(penalties)[:3]})
    ok = verdict_from_record(record())
    assert reward.speedup_reward(ok, 3.5, failed=0.0) == 3.5
    assert reward.speedup_reward(ok, 3.5, failed=0.0, cap=2.0) == 2.0
    assert reward.speedup_reward(ok, math.inf, failed=-1.0) == -1.0
    assert reward.speedup_reward(ok, -2.0, failed=-1.0) == -1.0
    assert reward.speedup_reward(hacked, 9.0, failed=-1.0) == -1.0


def test_summary_line_counts_stages():
    vs = [verdict_from_record(record()), verdict_from_record(record(ORD_01={"verdict": "fail"})),
          StagedVerdict("none", "load-failed")]
    assert reward.summarize(vs).split("\n") == [
        "stages reached: none 1, load 0, run 1, correctness 0, tolerance_free 1",
        "1 passed, 2 failed",
    ]
    assert STAGES[0] == "none" and STAGES[-1] == "tolerance_free"
