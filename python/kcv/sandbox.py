"""``kcv.verify()``: a KernelBench-style candidate judged in a sandboxed worker.

The candidate never runs in the caller's process. A worker (``python3 -m kcv.worker``, which
itself runs each candidate in a spawned child) is started with ``subprocess``; this side sends
the request, reads the events, and enforces a time limit on every stage: a stage that reports
no progress within the limit, or a worker that dies, fails the gate in progress with the
signature ``hang`` or ``crash``, and a fresh worker carries on with the remaining gates. The
same logic lives in C++ for ``kcv verify --reference`` and ``kcv audit``.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from .record import Record
from .worker import GATE_IDS

LOAD_TIMEOUT_S = 900.0


def _failed_gate(gate: str, cls: str, code: str, reason: str) -> dict:
    return {"id": gate, "verdict": "fail" if cls else "error", "signature": [cls] if cls else [], "code": code,
            "reason": reason, "probes": 0, "evidence": []}


class _Worker:
    def __init__(self, python: str, env: dict | None):
        self.proc = subprocess.Popen(
            [python, "-u", "-m", "kcv.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self.stderr_tail = b""

    def exchange(self, request: dict, stage_timeout_s: float, on_event) -> tuple[str, dict | None, dict, str, str]:
        """(end, record, gates seen, last stage, detail) with end in record | crashed | timed_out."""
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ, "out")
        sel.register(self.proc.stderr, selectors.EVENT_READ, "err")
        stage, gates, pending = "load", {}, b""
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        stdout_open = True
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return "timed_out", None, gates, stage, f"no progress in stage '{stage}' within the time limit"
            for key, _ in sel.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    stdout_open = stdout_open and key.data != "out"
                    continue
                if key.data == "err":
                    self.stderr_tail = (self.stderr_tail + chunk)[-4000:]
                    continue
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    try:
                        event = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    kind = event.get("event")
                    if kind == "stage":
                        stage = event.get("stage", stage)
                        deadline = time.monotonic() + (LOAD_TIMEOUT_S if stage == "load" else stage_timeout_s)
                    elif kind == "gate":
                        gates[event["result"]["id"]] = event["result"]
                    elif kind == "record":
                        return "record", event["record"], gates, stage, ""
                    if on_event:
                        on_event(event)
            if not stdout_open:
                # The worker ended its output without a record: it died.
                self.proc.wait()
                code = self.proc.returncode
                why = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
                tail = self.stderr_tail.decode(errors="replace")[-2000:]
                return "crashed", None, gates, stage, why + (f"; stderr: {tail}" if tail else "")

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def verify(
    reference: str | os.PathLike,
    candidate: str | os.PathLike,
    *,
    device: str = "cpu",
    seed: int = 0,
    gates: list[str] | None = None,
    quick: bool = False,
    stage_timeout_s: float = 300.0,
    settings: dict | None = None,
    python: str = sys.executable,
    env: dict | None = None,
    on_event=None,
) -> Record:
    """Judges a KernelBench candidate (a module defining ModelNew) against its problem module.

    Pure and seeded: the same files, device and seed give the same verdicts. Returns the record;
    ``record.gates["ORD-02"]["verdict"]``, ``record.standard_check``, ``record.failed``.
    """
    all_settings = {"seed": seed, "quick": quick, **(settings or {})}
    request = {
        "id": str(candidate),
        "reference": str(Path(reference).resolve()),
        "candidate": str(Path(candidate).resolve()),
        "device": device,
        "seed": seed,
        "settings": all_settings,
        "stage_timeout_s": stage_timeout_s,
    }
    remaining = [g for g in GATE_IDS if gates is None or g in gates]
    done: dict[str, dict] = {}
    record = None
    for _ in range(len(GATE_IDS) + 1):
        worker = _Worker(python, env)
        try:
            end, rec, seen, stage, detail = worker.exchange({**request, "gates": remaining}, stage_timeout_s, on_event)
        except BaseException:
            worker.kill()
            raise
        if end == "record":
            worker.close()
        else:
            worker.kill()
        done.update(seen)
        if end == "record":
            record = rec
            for g in rec.get("gates", []):
                done[g["id"]] = g
            break
        code = ("timeout:" if end == "timed_out" else "crash:") + stage
        if not stage.startswith("gate:"):
            record = {"kcv_record": 1, "reference": request["reference"], "candidate": {"path": request["candidate"]},
                      "error": {"code": code, "message": detail}}
            for g in remaining:
                done.setdefault(g, _failed_gate(g, "", code, detail))
            break
        gate = stage.split(":", 1)[1]
        cls = "hang" if end == "timed_out" else "crash"
        done[gate] = _failed_gate(gate, cls, code, f"the candidate {'hung' if cls == 'hang' else 'crashed'} during {gate} ({detail})")
        remaining = [g for g in remaining if g not in done]
        if not remaining:
            record = {"kcv_record": 1, "reference": request["reference"], "candidate": {"path": request["candidate"]}}
            break
    if record is None:
        record = {"kcv_record": 1, "error": {"code": "not-run", "message": "the worker gave up"}}
    record["gates"] = [done[g] for g in GATE_IDS if g in done]
    from . import _core

    return Record(json.loads(_core.normalise_record(json.dumps(record))))
