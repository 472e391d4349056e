"""A harness's run folder, audited as a user would: kcv corpus, kcv audit, kcv summary.

The folder is laid out the way KernelBench's generate-then-evaluate scripts leave it
(eval_results.json beside level_<L>_problem_<P>_sample_<S>_kernel.py), built here from the test
data, with labels a standard check would give: it accepts the NaN-swallowing ReLU.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from conftest import candidate, problem  # noqa: E402


def kcv_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcv", *args], capture_output=True, text=True, check=check,
                          timeout=900)


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harness")
    (root / "problems/level1").mkdir(parents=True)
    shutil.copy(problem("relu"), root / "problems/level1/1_ReLU.py")
    run = root / "runs/model_a"
    run.mkdir(parents=True)
    samples = {
        0: ("relu_correct_torch", {"compiled": True, "correctness": True}),
        1: ("relu_nan_swallowed", {"compiled": True, "correctness": True}),
        2: ("syntax_error", {"compiled": False, "correctness": False}),
    }
    labels = {"1": []}
    for s, (name, label) in samples.items():
        shutil.copy(candidate(name), run / f"level_1_problem_1_sample_{s}_kernel.py")
        labels["1"].append({"sample_id": s, **label, "metadata": {"correctness_trials": "(5 / 5)"}})
    (run / "eval_results.json").write_text(json.dumps(labels))
    return root


@pytest.fixture(scope="module")
def audited(run_folder: Path) -> tuple[Path, list[dict], dict]:
    corpus = run_folder / "corpus" / "corpus.jsonl"
    out = kcv_cli("corpus", str(run_folder / "runs"), "--problems", str(run_folder / "problems"),
                  "--out", str(corpus), "--bundle")
    assert "3 candidates written" in out.stdout, out.stdout + out.stderr
    journal = run_folder / "journal.jsonl"
    audit = kcv_cli("audit", str(corpus), "--out", str(journal), "--device", "cpu", "--quick", check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
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


def test_a_folder_without_runs_is_a_clear_error(tmp_path):
    (tmp_path / "problems").mkdir()
    out = kcv_cli("corpus", str(tmp_path), "--problems", str(tmp_path / "problems"), "--out",
                  str(tmp_path / "c.jsonl"), check=False)
    assert out.returncode != 0
    assert "no run folder" in out.stderr, out.stderr
