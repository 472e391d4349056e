"""`kcv report` end to end: the four files from a small journal, the page rendered by headless
Chromium (no console errors, the charts in the DOM, a screenshot kept under pytest's tmp dir),
the JUnit XML parsed as XML and the CSV read back."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

GATES = ["PRC-01", "PRC-02", "PRC-03", "ORD-01", "ORD-02", "ORD-03",
         "CMP-01", "CMP-02", "EXC-01", "EXC-02", "RES-01", "RES-02"]
TOLERANCE_FREE = {"ORD-02", "EXC-01", "EXC-02", "RES-01", "RES-02"}


def kcv_command() -> list[str]:
    """The kcv command: $KCV_CLI, else the installed package's."""
    if os.environ.get("KCV_CLI"):
        return [os.environ["KCV_CLI"]]
    return [sys.executable, "-m", "kcv"]


def run_kcv(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*kcv_command(), *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def kcv_report_available():
    try:
        probe = run_kcv("--help", timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"the kcv command cannot run here: {e}")
    if probe.returncode != 0 or not re.search(r"^\s+report\s", probe.stdout, re.M):
        pytest.skip("this kcv command has no `report` subcommand (reinstall, or set KCV_CLI to a build of kcv)")


def gate(gid: str, verdict: str = "pass", **extra) -> dict:
    return {"id": gid, "verdict": verdict, "tolerance_free": gid in TOLERANCE_FREE, "signature": [],
            "reason": "", "metric": 0.125, "probes": 1, "evidence": [], **extra}


def record(cid: str, failures: dict[str, dict], standard: tuple[bool, bool] | None, **extra) -> dict:
    gates = [gate(g, **failures[g]) if g in failures else gate(g) for g in GATES]
    failed = [g["id"] for g in gates if g["verdict"] == "fail"]
    r = {"kcv_record": 1, "contract": "relu-f32", "candidate": {"path": f"/c/{cid}.so", "xxh3_128": ""},
         "settings": {"seed": 0, "c": 4.0, "envelope_factor": 2.0, "ord03_margin": 1.2, "quick": True},
         "gates": gates, "failed_gates": failed,
         "floor": {p: bool(set(failed) & TOLERANCE_FREE) for p in ("strict", "ftz", "fast-math", "relaxed")},
         "any_violation": bool(failed), "seconds": 0.5, "corpus_id": cid, **extra}
    if standard is not None:
        r["standard_check"] = {"tol_1e-2": standard[0], "tol_1e-4": standard[1], "max_abs_diff": 0.003}
    return r


def failure(cls: str, probe: str, ratio) -> dict:
    ev = {"probe": probe, "signature": f"{cls}: y[2,17] = 0 where y* = nan", "output": "y", "worst_index": 2065,
          "worst_coords": [2, 17], "expected": "nan", "expected_bits": "0x7fc00000", "actual": 0.0,
          "actual_bits": "0x00000000", "ratio": ratio,
          "replay": f"kcv verify --contract relu-f32 --candidate ./k.so --seed 0 --gate {probe[:6]} --probe {probe}"}
    return {"verdict": "fail", "signature": [cls], "reason": f"{cls} seen", "evidence": [ev], "metric": ratio}


@pytest.fixture
def journal(tmp_path) -> Path:
    recs = [
        record("swallows-nan", {"EXC-01": failure("nan-swallowed", "EXC-01/scattered-0.005", "nan")}, (True, True)),
        record("tail-mask", {"CMP-01": failure("fails at N=17", "CMP-01/N=17", "inf")}, (True, False)),
        record("honest", {}, (True, True)),
        record("tight", {}, (False, False)),
        record("both <&> \"quoted\"", {"ORD-01": failure("error-bound", "ORD-01/task/seed=0", 3.5),
                                       "RES-01": failure("oob-write", "RES-01/p1", 0.0)}, (False, False),
               problem="/p/level1/19_ReLU.py", label={"correctness": False}),
        record("broken", {}, None, error={"code": "load-failed", "message": "no kcv_kernel symbol"}),
    ]
    path = tmp_path / "journal.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


@pytest.fixture
def calibration(tmp_path) -> Path:
    settings = []
    for c in (2, 4, 8):
        for m in (1.0, 1.2, 2.0):
            settings.append({"c": c, "envelope_factor": c / 2, "ord03_margin": m,
                             "controls": {"passed": 12 if c > 2 else 11, "total": 12, "rate": 1.0 if c > 2 else 11 / 12},
                             "redteam": {"caught": 19 - (c // 4) - (m > 1.2), "total": 19,
                                         "rate": (19 - (c // 4) - (m > 1.2)) / 19},
                             "corpus": {"rate_lo": 0.4 / c, "rate_hi": 0.6 / c, "rate": 0.4 / c}})
    doc = {"kcv_calibration": 1, "quick": True, "grid": {"c": [2, 4, 8], "ord03_margin": [1.0, 1.2, 2.0]},
           "settings": settings, "chosen": {"c": 4, "envelope_factor": 2, "ord03_margin": 1.0, "why": "tightest"},
           "gate_margins": [{"gate": "ORD-01", "threshold": 1, "largest_control_metric": 0.125,
                             "control": "elementwise on relu-f32", "margin": 8}],
           "method": {"corpus": "re-judged from stored metrics"}}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def report(kcv_report_available, journal, calibration, tmp_path) -> Path:
    out = tmp_path / "report"
    proc = run_kcv("report", str(journal), "--out", str(out), "--calibration", str(calibration))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 6 records: 5 judged, 3 of them with a failed gate.
    assert re.search(r"^2 passed, 3 failed$", proc.stdout, re.M), proc.stdout
    return out


def test_four_files_and_parseable_junit_and_csv(report):
    for name in ("report.html", "report.md", "report.csv", "report.junit.xml"):
        assert (report / name).stat().st_size > 200, name

    root = ET.parse(report / "report.junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("6", "3", "1")
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"swallows-nan", "tail-mask", "honest", "tight", 'both <&> "quoted"', "broken"}
    assert [f.get("type") for f in cases['both <&> "quoted"'].findall("failure")] == ["ORD-01", "RES-01"]
    assert cases['both <&> "quoted"'].get("classname") == "kcv.19_ReLU"
    f = cases["swallows-nan"].find("failure")
    assert f.get("type") == "EXC-01"
    assert "expected: nan (0x7fc00000)" in f.text
    assert "replay: kcv verify --contract relu-f32" in f.text
    assert cases["broken"].find("error").get("type") == "load-failed"
    assert cases["honest"].find("failure") is None

    rows = list(csv.DictReader(io.StringIO((report / "report.csv").read_text(), newline="")))
    assert len(rows) == 6 * len(GATES)
    assert [r["gate"] for r in rows[:12]] == GATES
    hit = [r for r in rows if r["candidate"] == 'both <&> "quoted"' and r["gate"] == "ORD-01"][0]
    assert (hit["verdict"], hit["ratio"], hit["worst_coords"], hit["operator"]) == ("fail", "3.5", "2 17", "19_ReLU")

    md = (report / "report.md").read_text()
    assert "## Failure rate per gate" in md and "## Worst examples" in md
    assert "| standard pass | 1 | 2 |" in md


class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: dict[str, int] = {}
        self.svgs: list[dict] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        a = dict(attrs)
        if tag == "svg":
            self.svgs.append(a)
        for key in ("src", "href"):
            if a.get(key):
                self.external.append(a[key])


def chromium_or_skip() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.skip("chromium is not installed (Debian package `chromium`)")
    return exe


def headless(exe: str, tmp_path: Path, page: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1300,2000", *extra, page.as_uri()],
        capture_output=True, text=True, timeout=180)


def console_problems(stderr: str, page: Path) -> list[str]:
    """Console messages and uncaught errors about the page (Chromium's own D-Bus noise aside)."""
    return [line for line in stderr.splitlines()
            if ("CONSOLE" in line and page.name in line) or "Uncaught" in line]


def test_console_check_sees_a_broken_page(tmp_path):
    # The detector must be able to fail: a page that throws is caught.
    exe = chromium_or_skip()
    bad = tmp_path / "bad.html"
    bad.write_text("<!doctype html><title>bad</title><script>notDefined();</script>")
    proc = headless(exe, tmp_path, bad, "--dump-dom")
    assert console_problems(proc.stderr, bad), proc.stderr[-2000:]


def test_page_renders_in_headless_chromium(report, tmp_path):
    exe = chromium_or_skip()
    page = report / "report.html"
    shot = tmp_path / "report.png"
    proc = headless(exe, tmp_path, page, f"--screenshot={shot}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_problems(proc.stderr, page) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1300, 2000)
    assert len(data) > 20_000   # a page of charts, not a blank one

    proc = headless(exe, tmp_path, page, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_problems(proc.stderr, page) == []
    dom = _Dom()
    dom.feed(proc.stdout)
    assert dom.tags.get("script", 0) == 0
    assert dom.external == []
    labels = [s.get("aria-label") for s in dom.svgs]
    # gate rates, floor, the differential at two tolerances, three calibration curves
    assert labels.count("failure rate per gate") == 1
    assert labels.count("tolerance-free floor per profile") == 1
    assert sum(1 for x in labels if x and x.startswith("standard check at")) == 2
    assert {"control pass rate (must stay 100%)", "red-team catch rate", "corpus failure rate"} <= set(labels)
    assert len(dom.svgs) == 7
    for s in dom.svgs:
        assert int(s["width"]) > 100 and int(s["height"]) > 50
    assert dom.tags.get("rect", 0) >= 12 + 5 + 8   # a bar per gate, per profile, a cell per matrix
    assert dom.tags.get("polyline", 0) == 9         # three c values on each of three curves
    # Text that must survive escaping.
    assert 'both &lt;&amp;&gt; "quoted"' in proc.stdout or "both &lt;&amp;&gt; &quot;quoted&quot;" in proc.stdout
    assert "0x7fc00000" in proc.stdout
