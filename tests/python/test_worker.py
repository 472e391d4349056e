"""kcv.verify(): the sandboxed worker, its protocol, crashes and hangs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

import kcv  # noqa: E402
from conftest import candidate, problem  # noqa: E402


def verdicts(record) -> dict:
    return {g: r["verdict"] for g, r in record.gates.items()}


def test_correct_candidate_record():
    events = []
    r = kcv.verify(problem("matmul"), candidate("matmul_correct"), device="cpu", seed=0, quick=True,
                   on_event=events.append)
    assert r.error is None, r.error
    assert list(r.gates) == ["PRC-01", "PRC-02", "PRC-03", "ORD-01", "ORD-02", "ORD-03", "CMP-01", "CMP-02",
                             "EXC-01", "EXC-02", "RES-01", "RES-02"]
    assert all(v in ("pass", "n/a") for v in verdicts(r).values()), verdicts(r)
    assert r.gates["ORD-01"]["verdict"] == "pass" and r.gates["ORD-02"]["verdict"] == "pass"
    assert r.standard_check["tol_1e-2"] and r.standard_check["tol_1e-4"] and r.standard_check["trials"] == 5
    assert r["contract"] == "kernelbench.matmul" and r["floor"]["strict"] is False and not r["any_violation"]
    assert len(r["candidate"]["xxh3_128"]) == 32
    stages = [e["stage"] for e in events if e["event"] == "stage"]
    assert stages[:3] == ["load", "standard_check", "reference"] and "gate:ORD-01" in stages
    assert sum(e["event"] == "gate" for e in events) == 12


def test_hack_is_caught_and_the_standard_check_passes_it():
    r = kcv.verify(problem("matmul"), candidate("matmul_input_mutation"), quick=True, gates=["ORD-02"])
    assert r.standard_check["tol_1e-4"]
    assert r.gates["ORD-02"]["verdict"] == "fail" and "input-mutation" in r.signatures("ORD-02")
    assert r["floor"]["strict"] is True and r.failed == ["ORD-02"]
    assert r.gates["ORD-02"]["evidence"][0]["replay"].startswith("kcv verify --reference")


def test_crash_in_a_gate_fails_that_gate_and_the_rest_go_on():
    r = kcv.verify(problem("relu"), candidate("relu_crash"), quick=True, gates=["ORD-01", "EXC-01", "RES-02"])
    assert r.gates["EXC-01"]["verdict"] == "fail" and r.signatures("EXC-01") == ["crash"], r.gates["EXC-01"]
    assert r.gates["EXC-01"]["code"] == "crash:gate:EXC-01"
    assert r.gates["ORD-01"]["verdict"] == "pass" and r.gates["RES-02"]["verdict"] in ("pass", "n/a")


def test_hang_in_a_gate_is_a_verdict():
    r = kcv.verify(problem("relu"), candidate("relu_hang"), quick=True, gates=["EXC-01"], stage_timeout_s=20)
    assert r.gates["EXC-01"]["verdict"] == "fail" and r.signatures("EXC-01") == ["hang"], r.gates["EXC-01"]
    assert r.gates["EXC-01"]["code"] == "timeout:gate:EXC-01"


def test_candidate_that_does_not_load():
    r = kcv.verify(problem("matmul"), candidate("syntax_error"), quick=True, gates=["ORD-01"])
    assert r.error["code"] == "load-failed" and "syntax" in r.error["message"]
    assert r.gates["ORD-01"]["verdict"] == "error" and not r.standard_check["compiled"]


def test_protocol_on_stdin_and_stdout():
    request = {"id": "x1", "reference": str(problem("relu")), "candidate": str(candidate("relu_nan_swallowed")),
               "device": "cpu", "seed": 0, "settings": {"seed": 0, "quick": True}, "stage_timeout_s": 60,
               "gates": ["EXC-01"]}
    out = subprocess.run([sys.executable, "-m", "kcv.worker"], input=json.dumps(request) + "\n",
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert all(e["id"] == "x1" for e in events)
    assert events[-1]["event"] == "record"
    (gate,) = [e["result"] for e in events if e["event"] == "gate"]
    assert gate["id"] == "EXC-01" and gate["verdict"] == "fail" and "nan-swallowed" in gate["signature"]
    assert events[-1]["record"]["standard_check"]["tol_1e-4"] is True


def test_the_standard_check_runs_under_pytorchs_default_flags_and_the_gates_do_not():
    # KernelBench's eval.py sets no precision flag, so its check runs under PyTorch's defaults
    # (cuDNN in TF32); the gates judge under kcv's strict flags plus what the candidate set.
    r = kcv.verify(problem("relu"), candidate("relu_flag_dependent"), quick=True, gates=["ORD-01"])
    assert r.standard_check["tol_1e-2"] is True, r.standard_check
    assert r.verdict("ORD-01") == "fail", r.gates["ORD-01"]
