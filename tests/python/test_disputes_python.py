"""Shrinking disputed Python candidates: the worker's ``settings.probe_override`` (one probe re-run
alone, with smaller sizes, on the candidate and the fp32 control), and ``kcv disputes`` driving it
over a journal written by ``kcv audit``, with a replay command that reproduces the failure."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import kcv  # noqa: E402
from conftest import audited_run_folder, candidate, executor_for, kcv_cli, problem  # noqa: E402


def run_override(problem_name: str, candidate_name: str, gate: str, override: dict) -> dict:
    record = kcv.verify(problem(problem_name), candidate(candidate_name), quick=True, gates=[gate],
                        settings={"probe_override": override})
    return record.gates[gate]


@pytest.fixture(scope="module")
def relu_exc01_probe() -> str:
    """The first EXC-01 probe with scattered special values, as the worker plans it for relu."""
    ex = executor_for("relu", "relu_nan_swallowed")
    scattered = [p["id"] for p in ex.plan("EXC-01")
                 if any((o.get("specials") or {}).get("pattern") == "scattered" for o in p.get("overrides", []))]
    assert scattered, ex.plan("EXC-01")
    return scattered[0]


@pytest.fixture(scope="module")
def matmul_cmp01_probe() -> tuple[str, dict]:
    """A CMP-01 probe of matmul whose M lies above 64, where matmul_partial stops computing."""
    ex = executor_for("matmul", "matmul_partial")
    above = [p for p in ex.plan("CMP-01") if p["dims"]["M"] > 64]
    assert above, [p["dims"] for p in ex.plan("CMP-01")]
    return above[0]["id"], above[0]["dims"]


def test_override_shrinks_the_input_and_the_control_passes(relu_exc01_probe):
    g = run_override("relu", "relu_nan_swallowed", "EXC-01",
                     {"probe": relu_exc01_probe, "dims": {"batch_size": 1, "dim": 3}})
    assert g["verdict"] == "fail", g
    assert g["signature"] == ["nan-swallowed"], g
    detail = g["detail"]
    assert detail["control"]["verdict"] == "pass", detail["control"]
    # The probe ran at the overridden size: 1 x 3 elements were checked, and the worst one lies there.
    assert detail["probe"]["dims"] == {"batch_size": 1, "dim": 3}
    assert detail["probes"][relu_exc01_probe]["checked"] == 3, detail["probes"]
    assert g["probes"] == 1
    ev = g["evidence"][0]
    assert ev["probe"] == relu_exc01_probe
    assert ev["worst_coords"][0] == 0 and 0 <= ev["worst_coords"][1] < 3, ev
    assert ev["actual"] == 0.0 and ev["expected"] == "nan", ev
    assert ev["replay"].endswith(f"--gate EXC-01 --probe '{relu_exc01_probe}' --dim batch_size=1 --dim dim=3")


def test_override_changes_the_problems_size_constants(matmul_cmp01_probe):
    probe, dims = matmul_cmp01_probe
    # matmul_partial computes only the first 64 rows: M = 65 fails, M = 64 passes, at any K and N.
    small = run_override("matmul", "matmul_partial", "CMP-01", {"probe": probe, "dims": {"M": 65, "K": 1, "N": 1}})
    assert small["verdict"] == "fail", small
    assert small["detail"]["control"]["verdict"] == "pass", small["detail"]["control"]
    assert small["detail"]["probe"]["dims"] == {"M": 65, "K": 1, "N": 1}
    assert small["evidence"][0]["worst_coords"] == [64, 0], small["evidence"][0]
    fits = run_override("matmul", "matmul_partial", "CMP-01", {"probe": probe, "dims": {"M": 64, "K": 1, "N": 1}})
    assert fits["verdict"] == "pass", fits
    assert fits["detail"]["control"]["verdict"] == "pass"
    assert dims["M"] > 64


def test_a_probe_the_gate_does_not_plan_or_a_dim_the_task_lacks_is_an_error(relu_exc01_probe):
    missing = run_override("relu", "relu_nan_swallowed", "EXC-01", {"probe": "EXC-01/no-such-probe"})
    assert missing["verdict"] == "error" and missing["code"] == "no-such-probe", missing
    assert "EXC-01/no-such-probe" in missing["reason"]
    wrong_gate = run_override("relu", "relu_nan_swallowed", "ORD-01", {"probe": relu_exc01_probe})
    assert wrong_gate["verdict"] == "error" and wrong_gate["code"] == "no-such-probe", wrong_gate
    unknown = run_override("relu", "relu_nan_swallowed", "EXC-01", {"probe": relu_exc01_probe, "dims": {"Q": 2}})
    assert unknown["verdict"] == "error" and unknown["code"] == "unknown-dim", unknown
    assert "'Q'" in unknown["reason"]
    zero = run_override("relu", "relu_nan_swallowed", "EXC-01", {"probe": relu_exc01_probe, "dims": {"dim": 0}})
    assert zero["verdict"] == "error" and zero["code"] == "dim-out-of-range", zero
    scale = run_override("relu", "relu_nan_swallowed", "EXC-01", {"probe": relu_exc01_probe, "family_scale": -1})
    assert scale["verdict"] == "error" and scale["code"] == "bad-override", scale
    record = kcv.verify(problem("relu"), candidate("relu_nan_swallowed"), quick=True, gates=["EXC-01"],
                        settings={"probe_override": relu_exc01_probe})
    assert record.gates["EXC-01"]["code"] == "bad-override", record.gates["EXC-01"]


# ------------------------------------------------------------------------------------------
# kcv disputes over an audited journal


@pytest.fixture(scope="module")
def journal(tmp_path_factory) -> Path:
    # The standard check accepts the NaN-swallowing ReLU; kcv's EXC-01 does not: a dispute.
    _, journal = audited_run_folder(tmp_path_factory.mktemp("disputes"), {
        0: ("relu_nan_swallowed", {"compiled": True, "correctness": True})})
    records = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    assert len(records) == 1 and records[0]["standard_check"]["tol_1e-2"] is True, records
    assert "EXC-01" in records[0]["failed_gates"], records[0]["failed_gates"]
    return journal


def packet_of(out_dir: Path) -> Path:
    packets = [p for p in out_dir.iterdir() if p.is_dir()]
    assert len(packets) == 1, packets
    return packets[0]


def test_disputes_shrinks_a_python_candidate_and_the_replay_reproduces_it(journal, tmp_path):
    out_dir = tmp_path / "packets"
    out = kcv_cli("disputes", str(journal), "--sample", "3", "--out", str(out_dir), "--max-trials", "12")
    assert "1 disputed" in out.stdout, out.stdout + out.stderr
    packet = packet_of(out_dir)
    assert not (packet / "shrink_request.json").exists()
    shrink = json.loads((packet / "shrink.json").read_text())
    assert shrink["reproduced"] is True, shrink
    assert shrink["original_dims"] == {"batch_size": 16, "dim": 1000}, shrink
    before = shrink["original_dims"]["batch_size"] * shrink["original_dims"]["dim"]
    after = shrink["dims"]["batch_size"] * shrink["dims"]["dim"]
    assert after < before, shrink["dims"]
    assert shrink["result"]["verdict"] == "fail", shrink["result"]
    assert 1 < len(shrink["trials"]) <= 12
    # Every trial that failed was checked against the control, and no step was kept where it failed.
    for t in shrink["trials"]:
        assert t["controls"] in ("pass", "fail", "-"), t
        if t["verdict"] == "fail":
            assert t["controls"] == "pass", t
    assert shrink["override"].get("dims"), shrink["override"]

    readme = (packet / "README.md").read_text()
    assert "Shrunk by re-running probe" in readme, readme
    command = readme.split("## Replay\n\n```sh\n", 1)[1].split("\n```", 1)[0]
    assert command == shrink["replay"], (command, shrink["replay"])
    assert command.startswith("kcv verify --reference "), command
    for k, v in shrink["dims"].items():
        if v != shrink["original_dims"][k]:
            assert f"--dim {k}={v}" in command, command

    args = shlex.split(command)
    replay = subprocess.run([sys.executable, "-m", "kcv", *args[1:]], capture_output=True, text=True, timeout=600)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "EXC-01" in replay.stdout and "nan-swallowed" in replay.stdout, replay.stdout


def test_disputes_without_shrinking_writes_the_request(journal, tmp_path):
    out_dir = tmp_path / "packets"
    kcv_cli("disputes", str(journal), "--sample", "3", "--out", str(out_dir), "--no-shrink")
    packet = packet_of(out_dir)
    assert not (packet / "shrink.json").exists()
    request = json.loads((packet / "shrink_request.json").read_text())
    assert request["gates"] == ["EXC-01"]
    assert request["shrink"]["dims"]["batch_size"]["try"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 15]
    assert "Not shrunk here (--no-shrink)" in (packet / "README.md").read_text()


def test_disputes_on_a_machine_without_the_candidate_writes_the_request(journal, tmp_path):
    records = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
    gone = str(tmp_path / "elsewhere" / "kernel.py")
    records[0]["candidate"]["path"] = gone
    moved = tmp_path / "moved.jsonl"
    moved.write_text("".join(json.dumps(r) + "\n" for r in records))
    out_dir = tmp_path / "packets"
    kcv_cli("disputes", str(moved), "--sample", "3", "--out", str(out_dir))
    packet = packet_of(out_dir)
    assert not (packet / "shrink.json").exists()
    assert (packet / "shrink_request.json").exists()
    assert f"'{gone}' is not on this machine" in (packet / "README.md").read_text()
