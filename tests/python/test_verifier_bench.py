"""bench/verifier_bench.py's arithmetic on records whose times are known: the battery and the
standard check with the candidate's compilations left out, the throughput with and without the
standard check, and --since taking one run's records."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "verifier_bench.py"
spec = importlib.util.spec_from_file_location("verifier_bench", BENCH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def record(standard: float, gates: dict, compiles: dict | None = None, standard_compile: float | None = None,
           load: float = 5.0, reference: float = 1.0) -> dict:
    timing = {"load_s": load, "standard_check_s": standard, "reference_s": reference, "gates_s": gates,
              "standard_check_phases_s": {"inputs": standard * 0.75, "candidate": standard * 0.25}}
    if compiles is not None:
        timing["gates_compile_s"] = compiles
    if standard_compile is not None:
        timing["standard_check_compile_s"] = standard_compile
    timing["total_s"] = load + standard + reference + sum(gates.values())
    return {"timing": timing}


def test_compilations_are_left_out_of_the_battery_the_check_and_the_throughput():
    # A Triton record: 3 s of its 10 s CMP-01 and 1 s of its 5 s check were compiling.
    triton = record(5.0, {"CMP-01": 10.0, "ORD-01": 2.0}, {"CMP-01": 3.0, "ORD-01": 0.0}, 1.0)
    plain = record(4.0, {"CMP-01": 6.0, "ORD-01": 2.0})
    s = bench.analyse([triton, plain], workers=2, gpus=1, wall_s=None)
    by_battery = sorted((k["battery_s"], k["standard_s"]) for k in s["per_kernel"])
    assert by_battery == [(9.0, 4.0), (10.0, 4.0)]  # 1 + 12 - 3 and 5 - 1; 1 + 8 and 4
    assert s["ratio_of_sums"] == pytest.approx(19.0 / 8.0)
    # Busy time per record: its total less its build and its compilations.
    busy = (triton["timing"]["total_s"] - 5.0 - 3.0 - 1.0) + (plain["timing"]["total_s"] - 5.0)
    assert s["kernels_per_gpu_hour_excluding_builds"] == pytest.approx(2 / (busy / 2 / 3600))
    gates_only = busy - (5.0 - 1.0) - 4.0
    assert s["kernels_per_gpu_hour_excluding_builds_and_standard_check"] == pytest.approx(2 / (gates_only / 2 / 3600))
    assert s["battery_share"]["CMP-01"] == pytest.approx(13.0 / 19.0)
    assert s["standard_check_share"] == {"inputs": pytest.approx(0.75), "candidate": pytest.approx(0.25)}
    assert s["compile_timed"] == 1


def test_a_standard_check_ended_by_the_candidates_error_is_left_out_of_the_ratio():
    ran = record(4.0, {"CMP-01": 6.0, "ORD-01": 2.0})
    crashed = record(0.0004, {"CMP-01": 21.0, "ORD-01": 0.3})
    crashed["standard_check"] = {"error": "NameError: name 'math' is not defined", "tol_1e-2": False}
    s = bench.analyse([ran, crashed], workers=1, gpus=1, wall_s=None)
    assert s["compared"] == 1 and s["standard_check_errored"] == 1
    assert s["ratio_median"] == pytest.approx(9.0 / 4.0)
    # Its time still counts in the throughput: the audit spent it.
    busy = ran["timing"]["total_s"] - 5.0 + crashed["timing"]["total_s"] - 5.0
    assert s["kernels_per_gpu_hour_excluding_builds"] == pytest.approx(2 / (busy / 3600))
    assert "left out of the ratio" in bench.table(s)


def test_since_measures_one_runs_records(tmp_path, capsys, monkeypatch):
    journal = tmp_path / "journal.jsonl"
    earlier, later = record(1.0, {"CMP-01": 100.0}), record(2.0, {"CMP-01": 4.0})
    journal.write_text("".join(json.dumps(r) + "\n" for r in (earlier, later)))
    monkeypatch.setattr("sys.argv", ["verifier_bench.py", "--journal", str(journal), "--since", "1",
                                     "--device", "cpu", "--out", str(tmp_path / "out")])
    assert bench.main() == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["records"] == 1 and summary["battery_s_median"] == pytest.approx(5.0)
    assert "| records / timed / compared | 1 / 1 / 1 |" in capsys.readouterr().out
