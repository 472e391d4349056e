"""A harness's run folder, audited as a user would: kcv corpus, kcv audit, kcv summary.

The folder is laid out the way KernelBench's generate-then-evaluate scripts leave it
(eval_results.json beside level_<L>_problem_<P>_sample_<S>_kernel.py), built here from the test
data, with labels a standard check would give: it accepts the NaN-swallowing ReLU.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conftest import audited_run_folder, kcv_cli  # noqa: E402


@pytest.fixture(scope="module")
def audited(tmp_path_factory) -> tuple[Path, list[dict], dict]:
    _, journal = audited_run_folder(tmp_path_factory.mktemp("harness"), {
        0: ("relu_correct_torch", {"compiled": True, "correctness": True}),
        1: ("relu_nan_swallowed", {"compiled": True, "correctness": True}),
        2: ("syntax_error", {"compiled": False, "correctness": False}),
    })
    records = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    summary = json.loads(Path(str(journal) + ".summary.json").read_text())
    return journal, records, summary


def by_sample(records: list[dict]) -> dict[int, dict]:
    return {int(r["corpus_id"].rsplit("sample", 1)[1]): r for r in records}


def test_every_candidate_gets_one_record_with_its_label(audited):
    _, records, _ = audited
    assert sorted(r["corpus_id"] for r in records) == [f"runs/model_a/level1/problem1/sample{s}" for s in range(3)]
    recs = by_sample(records)
    assert recs[1]["label"]["correctness"] is True and recs[1]["label"]["source"] == "eval_results.json"
    assert recs[2]["label"]["compiled"] is False


def test_gates_catch_what_the_label_accepted(audited):
    _, records, _ = audited
    recs = by_sample(records)
    clean = {g["id"]: g["verdict"] for g in recs[0]["gates"]}
    assert all(v in ("pass", "n/a") for v in clean.values()), clean
    swallowed = {g["id"]: g["verdict"] for g in recs[1]["gates"]}
    assert swallowed["EXC-01"] == "fail", swallowed
    # The standard check, rerun here, accepts it as the label did.
    assert recs[1]["standard_check"]["tol_1e-2"] is True
    assert recs[2]["error"]["code"] == "load-failed"


def test_summary_has_parity_and_the_differential(audited):
    _, _, summary = audited
    assert summary["records"] == 3 and summary["judged"] == 2 and summary["errors"] == 1
    assert summary["parity"]["compared"] == 3 and summary["parity"]["agree"] == 3, summary["parity"]
    d = summary["differential"]["tol_1e-2"]
    assert d["standard_pass_kcv_violation"] == 1 and d["standard_pass_kcv_clean"] == 1, d
    assert summary["gates"]["EXC-01"]["fail"] == 1


def test_a_second_run_adds_nothing(audited):
    journal, records, _ = audited
    again = kcv_cli("audit", str(journal.parent / "corpus" / "corpus.jsonl"), "--out", str(journal), "--device",
                    "cpu", "--quick")
    assert "0 new records" in again.stderr, again.stderr
    assert len([line for line in journal.read_text().splitlines() if line.strip()]) == len(records)


def test_trace_times_each_stage_and_progress_has_a_line_per_record(audited, tmp_path):
    journal, _, _ = audited
    out = kcv_cli("audit", str(journal.parent / "corpus" / "corpus.jsonl"), "--out", str(tmp_path / "j.jsonl"),
                  "--device", "cpu", "--quick", "--trace", "--limit", "1", "--probe-budget", "0.01")
    lines = out.stderr.splitlines()
    stages = [re.fullmatch(r"\[\s*([0-9.]+) s\] (\S+): (\S+).*", line) for line in lines]
    stages = [m for m in stages if m]
    assert {m[3] for m in stages} >= {"load", "standard_check", "reference", "gate:ORD-01", "gate:RES-02"}, out.stderr
    assert len({m[2] for m in stages}) == 1
    times = [float(m[1]) for m in stages]
    assert times == sorted(times)
    # Not a terminal: one plain progress line per finished record, with rate and ETA.
    assert any(re.match(r"\[1/1\] [0-9.]+ kernels/s, ETA 0 s", line) for line in lines), out.stderr
    # 16 x 1000 floats in and out are over 0.01 MiB: the gates probed at dim 1000 halved four times.
    record = json.loads((tmp_path / "j.jsonl").read_text().splitlines()[0])
    assert {d["name"]: d["nominal"] for d in record["task"]["contract"]["dims"]} == {"batch_size": 16, "dim": 63}


def test_a_folder_without_runs_is_a_clear_error(tmp_path):
    (tmp_path / "problems").mkdir()
    out = kcv_cli("corpus", str(tmp_path), "--problems", str(tmp_path / "problems"), "--out",
                  str(tmp_path / "c.jsonl"), check=False)
    assert out.returncode != 0
    assert "no run folder" in out.stderr, out.stderr
