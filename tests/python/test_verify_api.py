"""kcv.verify()'s inputs (paths, source text, module objects), its records' timing, and the
sandbox behind it (libkcv's PythonWorker, bound into kcv._core)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import tempfile
import types

import pytest

pytest.importorskip("torch")

import kcv  # noqa: E402
from conftest import candidate, problem  # noqa: E402
from kcv.sandbox import source_label  # noqa: E402

GATES = ["ORD-01", "EXC-01"]

# Loads, then kills its own process: a candidate that crashes while loading.
CRASH_ON_LOAD = """import os
import signal

import torch.nn as nn

os.kill(os.getpid(), signal.SIGSEGV)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""


# ReLU, or zeros where the worker's environment asks for them.
READS_ENV = """import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        if os.environ.get("KCV_TEST_ZERO_OUTPUT") == "1":
            return torch.zeros_like(x)
        return torch.relu(x)
"""


def import_file(path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"kcv_test_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def without_times(record: dict) -> dict:
    """The record less what a clock decides."""
    return {k: v for k, v in record.items() if k not in ("seconds", "timing")}


@pytest.fixture(scope="module")
def three_ways():
    """One problem and candidate judged from paths, from source text and from module objects."""
    ref, cand = problem("relu"), candidate("relu_nan_swallowed")
    run = lambda r, c: kcv.verify(r, c, quick=True, seed=3, gates=GATES)  # noqa: E731
    return {
        "path": run(ref, cand),
        "source": run(ref.read_text(), cand.read_text()),
        "module": run(import_file(ref), import_file(cand)),
        "candidate source": run(ref, cand.read_text()),
    }


def test_paths_sources_and_modules_give_the_same_verdicts(three_ways):
    verdicts = {how: r.verdicts for how, r in three_ways.items()}
    assert verdicts["path"] == {"ORD-01": "pass", "EXC-01": "fail"}, verdicts
    assert verdicts["source"] == verdicts["path"] and verdicts["module"] == verdicts["path"], verdicts
    for how, r in three_ways.items():
        assert r.error is None, (how, r.error)
        assert "nan-swallowed" in r.signatures("EXC-01"), (how, r.gates["EXC-01"])
        assert r.standard_check["tol_1e-4"] is True, how


def test_source_text_and_module_give_the_same_record(three_ways):
    source, module = three_ways["source"], three_ways["module"]
    assert without_times(source) == without_times(module)
    cand_label = source_label(candidate("relu_nan_swallowed").read_text())
    assert source["candidate"]["path"] == cand_label
    assert source["reference"] == source_label(problem("relu").read_text())
    assert source["candidate"]["xxh3_128"] == three_ways["path"]["candidate"]["xxh3_128"]
    # The replay command names the label, never the temporary file the worker read.
    replay = source.gates["EXC-01"]["evidence"][0]["replay"]
    assert cand_label in replay and "kcv-source-" not in replay, replay


def test_a_path_record_is_the_source_record_under_another_name(three_ways):
    """Only the name differs: the source's label stands where the path stood."""
    path = candidate("relu_nan_swallowed")
    text = json.dumps(without_times(three_ways["path"]))
    assert str(path.resolve()) in text
    text = text.replace(str(path.resolve()), source_label(path.read_text()))
    assert json.loads(text) == without_times(three_ways["candidate source"])


def test_a_problem_given_as_source_is_named_after_its_hash(three_ways):
    digest = hashlib.sha256(problem("relu").read_bytes()).hexdigest()[:16]
    assert three_ways["path"]["contract"] == "kernelbench.relu"
    assert three_ways["source"]["contract"] == f"kernelbench.kcv_source_{digest}"
    assert three_ways["module"]["contract"] == three_ways["source"]["contract"]


def test_the_same_source_and_seed_give_the_same_record(three_ways):
    again = kcv.verify(problem("relu").read_text(), candidate("relu_nan_swallowed").read_text(),
                       quick=True, seed=3, gates=GATES)
    assert without_times(again) == without_times(three_ways["source"])


def test_timing_of_every_stage(three_ways):
    for how, r in three_ways.items():
        t = r.timing
        assert set(t) == {"startup_s", "load_s", "standard_check_s", "standard_check_phases_s", "reference_s",
                          "gates_s", "total_s"}, (how, t)
        phases = t["standard_check_phases_s"]
        assert set(phases) == {"inputs", "models", "reference", "candidate", "compare"}, (how, t)
        assert 0 < sum(phases.values()) <= t["standard_check_s"], (how, t)
        assert set(t["gates_s"]) == set(GATES), (how, t)
        parts = [t["startup_s"], t["load_s"], t["standard_check_s"], t["reference_s"], *t["gates_s"].values()]
        assert all(isinstance(s, float) and s >= 0 for s in parts), (how, t)
        # The stages run one after another inside the total, measured by the same clock.
        assert sum(parts) <= t["total_s"] and t["total_s"] == r["seconds"], (how, t)
        assert t["load_s"] > 0 and t["gates_s"]["ORD-01"] > 0, (how, t)


def test_source_files_live_only_during_the_call(monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen = []

    def look(event):
        if event.get("stage") == "load":
            seen.extend(p.name for p in tmp_path.iterdir())

    r = kcv.verify(problem("relu"), candidate("relu_correct_torch").read_text(), quick=True, gates=["ORD-01"],
                   on_event=look)
    assert r.verdicts == {"ORD-01": "pass"}, r.verdicts
    assert seen and all(name.startswith("kcv-source-") for name in seen), seen
    assert list(tmp_path.iterdir()) == []


def test_source_with_a_syntax_error_is_a_record():
    text = candidate("syntax_error").read_text()
    assert "\n" in text
    r = kcv.verify(problem("relu"), text, quick=True, gates=["ORD-01", "EXC-01"])
    assert r.error["code"] == "load-failed" and "syntax" in r.error["message"], r.error
    assert source_label(text) in r.error["message"] and "kcv-source-" not in r.error["message"], r.error
    assert r.verdicts == {"ORD-01": "error", "EXC-01": "error"}, r.verdicts
    assert not r.standard_check["compiled"]
    t = r.timing
    assert t["load_s"] >= 0 and t["gates_s"] == {} and t["total_s"] >= t["load_s"], t
    assert "standard_check_s" not in t and "reference_s" not in t, t


def test_a_module_without_source_is_refused():
    bare = types.ModuleType("kcv_test_bare")
    with pytest.raises(TypeError, match="kcv_test_bare.*no Python source"):
        kcv.verify(problem("relu"), bare, quick=True)
    compiled = types.ModuleType("kcv_test_compiled")
    compiled.__file__ = kcv._core.__file__
    with pytest.raises(TypeError, match="kcv_test_compiled.*no Python source"):
        kcv.verify(problem("relu"), compiled, quick=True)


def test_other_objects_and_missing_files_are_refused(tmp_path):
    with pytest.raises(TypeError, match="candidate must be a path"):
        kcv.verify(problem("relu"), 42, quick=True)
    with pytest.raises(FileNotFoundError, match="reference .*missing.py"):
        kcv.verify(str(tmp_path / "missing.py"), candidate("relu_correct_torch"), quick=True)
    with pytest.raises(FileNotFoundError, match="candidate"):
        kcv.verify(problem("relu"), tmp_path, quick=True)


def test_crash_on_load_is_a_record_with_only_the_gates_asked_for():
    r = kcv.verify(problem("relu"), CRASH_ON_LOAD, quick=True, gates=["ORD-01", "RES-02"])
    assert r.error["code"] == "crash:load" and "killed by signal 11" in r.error["message"], r.error
    assert r.verdicts == {"ORD-01": "error", "RES-02": "error"}, r.verdicts
    assert r.gates["ORD-01"]["code"] == "crash:load"


def test_crash_keeps_the_timing_of_every_worker():
    """The gate before the crash was timed by the first worker, the crashed gate by the parent
    and the gate after it by a fresh worker: all three are in the record."""
    gates = ["ORD-01", "EXC-01", "RES-02"]
    events = []
    r = kcv.verify(problem("relu"), candidate("relu_crash"), quick=True, gates=gates, on_event=events.append)
    assert r.gates["EXC-01"]["code"] == "crash:gate:EXC-01" and r.signatures("EXC-01") == ["crash"]
    assert r.verdicts["ORD-01"] == "pass", r.verdicts
    gates_s = r.timing["gates_s"]
    assert set(gates_s) == set(gates) and all(s >= 0 for s in gates_s.values()), gates_s
    first_worker = [e for e in events if e["event"] == "gate" and e["result"]["id"] == "ORD-01"]
    assert len(first_worker) == 1 and first_worker[0]["seconds"] == gates_s["ORD-01"], first_worker
    # A fresh worker loaded the candidate again: two load stages in the events.
    assert sum(e["event"] == "stage" and e["stage"] == "load" for e in events) == 2


def test_an_exception_in_on_event_reaches_the_caller():
    class Stop(Exception):
        pass

    def stop(event):
        raise Stop(event["stage"])

    with pytest.raises(Stop, match="load"):
        kcv.verify(problem("relu"), candidate("relu_correct_torch"), quick=True, gates=["ORD-01"], on_event=stop)


def test_python_and_env_are_the_workers():
    with pytest.raises(RuntimeError, match="cannot start '/nonexistent/python3"):
        kcv.verify(problem("relu"), candidate("relu_correct_torch"), python="/nonexistent/python3")
    plain = kcv.verify(problem("relu"), READS_ENV, quick=True, gates=["ORD-01"], python=sys.executable)
    assert plain.verdicts == {"ORD-01": "pass"}, plain.verdicts
    broken = kcv.verify(problem("relu"), READS_ENV, quick=True, gates=["ORD-01"], python=sys.executable,
                        env={"KCV_TEST_ZERO_OUTPUT": 1})
    assert broken.verdicts == {"ORD-01": "fail"}, broken.verdicts
    assert broken.standard_check["tol_1e-2"] is False


def test_gpu_timing_joins_both_children():
    """On a GPU the standard check has a child of its own: loads and totals add up, and the
    standard check's time comes from that child (numbers exact in binary, so sums are exact)."""
    from kcv.worker import _join_timing

    standard = {"startup_s": 0.5, "load_s": 1.25, "standard_check_s": 0.5, "gates_s": {}, "total_s": 2.0}
    gates = {"startup_s": 0.25, "load_s": 0.75, "reference_s": 0.25, "gates_s": {"ORD-01": 3.0}, "total_s": 4.5}
    assert _join_timing(standard, gates) == {"startup_s": 0.75, "load_s": 2.0, "standard_check_s": 0.5,
                                             "reference_s": 0.25, "gates_s": {"ORD-01": 3.0}, "total_s": 6.5}
    # A standard child that left no timing adds nothing.
    assert _join_timing({}, gates) == {**gates}


def test_gates_probe_at_the_scaled_sizes_and_the_standard_check_at_the_problems():
    r = kcv.verify(problem("matmul"), candidate("matmul_correct"), seed=0, gates=["ORD-01", "CMP-01"],
                   settings={"probe_budget_bytes": 32 << 10})
    assert not r.failed, r.gates
    assert {d["name"]: d["nominal"] for d in r["task"]["contract"]["dims"]} == {"M": 32, "K": 64, "N": 48}
    assert any("probe budget" in n for n in r["task"]["notes"])
    # The standard check is KernelBench's: at the problem's own sizes, which the candidate meets.
    assert r.standard_check["tol_1e-4"] is True and r.standard_check["trials"] == 5


def test_the_command_line_sets_the_probe_budget(tmp_path):
    from conftest import kcv_cli

    out = tmp_path / "record.json"
    kcv_cli("verify", "--reference", str(problem("matmul")), "--candidate", str(candidate("matmul_correct")),
            "--gate", "ORD-01", "--probe-budget", "0.03125", "--json", str(out))
    record = json.loads(out.read_text())
    assert {d["name"]: d["nominal"] for d in record["task"]["contract"]["dims"]} == {"M": 32, "K": 64, "N": 48}
    bad = kcv_cli("verify", "--reference", str(problem("matmul")), "--candidate", str(candidate("matmul_correct")),
                  "--probe-budget", "0", check=False)
    assert bad.returncode != 0 and "probe-budget" in bad.stderr


def test_a_replay_carries_the_probe_budget_and_reproduces(tmp_path):
    import shlex

    from conftest import kcv_cli

    r = kcv.verify(problem("relu"), candidate("relu_nan_swallowed"), gates=["EXC-01"],
                   settings={"probe_budget_bytes": 32768})
    assert r.gates["EXC-01"]["verdict"] == "fail"
    replay = r.gates["EXC-01"]["evidence"][0]["replay"]
    assert " --probe-budget 0.03125 " in replay, replay
    args = shlex.split(replay)
    assert args[0] == "kcv"
    out = tmp_path / "replayed.json"
    kcv_cli(*args[1:], "--json", str(out), check=False)
    again = json.loads(out.read_text())
    assert [g["verdict"] for g in again["gates"]] == ["fail"]
    assert again["task"]["contract"]["dims"] == r["task"]["contract"]["dims"]
