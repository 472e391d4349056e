"""``python3 -m kcv.worker``: judges Python candidates, one request per line on stdin.

Request (one JSON line)::

    {"id", "reference": path, "candidate": path, "device": "cpu" | "cuda[:i]", "seed",
     "settings": {...}, "stage_timeout_s", "gates": [ids]?}

``settings.probe_override = {"probe": id, "dims": {...}?, "family_scale": x?, "single_special":
bool?}`` re-runs one planned probe of each requested gate alone (``kcv disputes`` shrinks with
it, ``kcv verify --probe`` replays with it): libkcv applies the override, the probe runs on the
positive control (the fp32 Model) and then on the candidate, and the gate result carries the
control's outcome in ``detail.control`` (also announced in a stage event before the candidate
runs). Such a request runs no standard check.

Events (JSON lines on stdout)::

    {"event": "stage", "id", "stage": "load" | "reference" | "standard_check" | "gate:ORD-01", ...}
    {"event": "gate", "id", "result": GateResult, "seconds": time spent on the gate}
    {"event": "record", "id", "record": Record}

Every record carries ``timing``: seconds per stage, measured here with ``time.perf_counter``
(``startup_s``: the imports; ``load_s``: the candidate's build and load; ``standard_check_s``
with its phases in ``standard_check_phases_s``, ``reference_s``, ``gates_s`` by gate id and, for
Triton candidates, ``standard_check_compile_s`` and ``gates_compile_s``: the part of the check's
and of each gate's seconds that Triton spent compiling; ``total_s``); a stage that did not run
is absent.

This process is a relay: each request runs in a child process of its own, forked by a fork
server that preloads torch and kcv and never initialises CUDA (never fork after CUDA is
initialised), so that no state of one candidate (CUDA context, allocator, patched modules)
reaches the next. The child writes events to the relay,
which forwards them. When the child dies (a crash, an illegal address), the relay exits without
a record: the parent sees the stream end in the stage last announced and records a crash there.
The parent enforces the time limit of each stage and kills the relay; the child dies with it.

On a GPU the standard check runs in a child of its own with PyTorch's own allocator, exactly as
KernelBench runs it; the gates run in a child with kcv's guarded allocator installed.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

GATE_IDS = ["PRC-01", "PRC-02", "PRC-03", "ORD-01", "ORD-02", "ORD-03",
            "CMP-01", "CMP-02", "EXC-01", "EXC-02", "RES-01", "RES-02"]


def sanitize(value: Any) -> Any:
    """JSON has no NaN or Inf: such numbers travel as strings, as libkcv writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitize(v) for v in value]
    return value


# --------------------------------------------------------------------------------------------
# The child: one candidate


class _Events:
    def __init__(self, conn, request_id: str):
        self.conn, self.id = conn, request_id

    def send(self, event: dict) -> None:
        self.conn.send(json.dumps(sanitize({**event, "id": self.id})))

    def stage(self, stage: str, **extra) -> None:
        self.send({"event": "stage", "stage": stage, **extra})


def _die_with_parent() -> None:
    """A process must not outlive its parent: the relay the parent kills on a timeout, and the
    kcv process that runs the relay."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except Exception:
        pass


def _release_fork_server() -> None:
    """A forked child inherits the write end of the pipe by which the fork server learns that
    the relay has gone; held open here, it would keep the server, and so this child (whose parent
    is the server), alive after the relay was killed. Closed, the chain ends with the relay."""
    from multiprocessing import forkserver

    fd = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_alive_fd", None)
    if isinstance(fd, int):
        try:
            os.close(fd)
        except OSError:
            pass


def _device_lock_path(device) -> str:
    """One lock file per physical GPU, shared by every worker on the host that uses it."""
    import torch

    uuid = str(torch.cuda.get_device_properties(device).uuid)
    return os.path.join(tempfile.gettempdir(), f"kcv-gpu-{uuid}.lock")


@contextlib.contextmanager
def _device_lock(path: str, exclusive: bool):
    """Holds a GPU's lock, shared or alone. flock lets shared holders come and go while a worker
    waits to hold it alone, which can then wait for as long as its neighbours keep checking; so
    every worker passes a turnstile (a second lock, held only while taking the first), and one
    that waits to hold the device alone keeps the turnstile meanwhile: checks that start after it
    wait behind it."""
    with open(path + ".turn", "a") as turn, open(path, "a") as lock:
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _out_of_memory(result: dict) -> bool:
    return str(result.get("error") or "").startswith("OutOfMemoryError")


def standard_check_sharing_device(session, check) -> dict:
    """The standard check on a GPU that other workers share. It runs at KernelBench's own sizes,
    tens of GiB a call for some problems, so several at once can run the device out of memory:
    each holds the device's lock shared, and one that runs out of memory runs again holding it
    alone. Only an out-of-memory error with the device to itself is the candidate's result."""
    if session.device.type != "cuda":
        return check(session)
    import torch

    from .kernelbench import failed_check

    def attempt() -> dict:
        try:
            return check(session)
        except torch.OutOfMemoryError as e:
            return failed_check(f"{type(e).__name__}: {e}")

    path = _device_lock_path(session.device)
    with _device_lock(path, exclusive=False):
        result = attempt()
    if not _out_of_memory(result):
        return result
    torch.cuda.empty_cache()
    with _device_lock(path, exclusive=True):
        result = attempt()
    result["retried_alone"] = True
    return result


def _gate_error(gate: str, code: str, reason: str, verdict: str = "error") -> dict:
    return {"id": gate, "verdict": verdict, "signature": [], "code": code, "reason": reason, "probes": 0,
            "evidence": []}


def _replay(request: dict, gate: str, probe: str, override: dict | None = None) -> str:
    device = request.get("device", "cpu")
    settings = request.get("settings", {})
    seed = settings.get("seed", request.get("seed", 0))
    options = " --quick" if settings.get("quick") else ""
    if settings.get("probe_budget_bytes"):
        # The probe budget sets the task's sizes, and so the probes a gate plans.
        options += f" --probe-budget {settings['probe_budget_bytes'] / (1 << 20)!r}"
    extra = ""
    if override:
        extra += "".join(f" --dim {k}={v}" for k, v in sorted((override.get("dims") or {}).items()))
        if override.get("family_scale"):
            extra += f" --scale {override['family_scale']:g}"
        if override.get("single_special"):
            extra += " --single-special"
    return (f"kcv verify --reference {request['reference']} --candidate {request['candidate']} "
            f"--device {device.split(':')[0]} --seed {seed}{options} --gate {gate} --probe '{probe}'{extra}")


def _probe_override(settings: dict) -> dict | None:
    override = settings.get("probe_override")
    return override if isinstance(override, dict) else None


def _judge_overridden_probe(gate: str, executor, request: dict, override: dict, events: _Events) -> dict:
    """One probe of the gate, re-run alone with the override: on the control, then on the
    candidate. A failure where the control fails too is not the candidate's (fairness rule 1):
    the verdict is n/a, and detail.control says why, for the shrink driver in libkcv."""
    from .executor import add_detail

    probe, code, reason = executor.overridden_probe(gate, override)
    if probe is None:
        return _gate_error(gate, code, reason)
    progress = lambda probe_id: events.stage(f"gate:{gate}", probe=probe_id)
    ctl = executor.run_probes(gate, [probe], "control", progress)
    control = {"verdict": ctl["verdict"],
               "reason": ctl["evidence"][0]["signature"] if ctl.get("evidence") else ctl.get("reason", "")}
    events.stage(f"gate:{gate}", probe=probe["id"], control=control)
    result = executor.run_probes(gate, [probe], "candidate", progress)
    add_detail(result, {"control": control, "probe_override": override, "probe": probe})
    if result["verdict"] == "fail" and control["verdict"] in ("fail", "error"):
        result["detail"]["candidate_verdict"] = "fail"
        result["verdict"] = "n/a"
        result["reason"] = (f"positive control model_fp32 does not pass this probe here "
                            f"({control['verdict']}: {control['reason']}); the candidate: {result.get('reason', '')}")
    for e in result.get("evidence", []):
        if e.get("probe"):
            e["replay"] = _replay(request, gate, e["probe"], override)
    return result


def _judge_gate(gate: str, executor, request: dict, settings: dict, events: _Events) -> dict:
    """One gate with the fairness rules: not applicable by construction, or where the control
    fails it (rule 1); a failure counts only if its first failing probe fails again (rule 17)."""
    from . import _core

    why = _core.not_applicable(gate, executor.task.contract)
    if why:
        return {"id": gate, "verdict": "n/a", "signature": [], "reason": why, "probes": 0, "evidence": []}
    override = _probe_override(settings)
    if override is not None:
        return _judge_overridden_probe(gate, executor, request, override, events)
    if settings.get("probe_override") is not None:
        return _gate_error(gate, "bad-override", f"settings.probe_override is not an object: "
                                                 f"{settings['probe_override']!r}")
    progress = lambda probe_id: events.stage(f"gate:{gate}", probe=probe_id)
    if settings.get("check_controls", True):
        result, excluded = executor.run_gate_with_control(gate, progress)
        if result is None:
            first = next(iter(excluded.values()))
            return {"id": gate, "verdict": "n/a", "signature": [], "probes": 0, "evidence": [],
                    "reason": f"positive control model_fp32 does not pass this gate here ({first})",
                    "detail": {"excluded_by_control": [{"probe": k, "reason": v} for k, v in excluded.items()]}}
    else:
        result = executor.run_gate(gate, progress=progress)
    if result["verdict"] == "fail" and settings.get("confirm_failures", True) and result.get("evidence") \
            and not result.get("code"):
        probe = result["evidence"][0].get("probe", "")
        if probe:
            executor.forget_models()
            again = executor.run_gate(gate, only_probe=probe, progress=progress)
            result.setdefault("detail", {})
            result["detail"]["replayed"] = probe
            if again["verdict"] != "fail":
                result["verdict"] = "error"
                result["code"] = "not-reproducible"
                result["reason"] = (f"failed, but probe {probe} did not fail again with fresh models "
                                    f"({again['verdict']}): {result['reason']}")
    for e in result.get("evidence", []):
        if not e.get("replay") and e.get("probe"):
            e["replay"] = _replay(request, gate, e["probe"])
    return result


def _child_main(request: dict, conn, part: str) -> None:
    """part: "all" (everything in this process), "standard" or "gates"."""
    _die_with_parent()
    _release_fork_server()
    # Candidates print; stdout belongs to the relay's protocol, so theirs goes to stderr.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    events = _Events(conn, str(request.get("id", "")))
    try:
        record = _judge(request, events, part)
        events.send({"event": "record", "record": record})
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        conn.close()


class _TritonCompileClock:
    """Seconds Triton spends compiling the candidate's kernels (a new specialisation at each new
    size or dtype, the configs an autotuner tries), from the hooks Triton calls before and after
    each compilation (``triton.knobs.runtime``); hooks already there still run. The benchmarks
    leave this time out with the candidate's build. ``seconds`` is None where this Triton has no
    such hooks."""

    def __init__(self):
        self.seconds: float | None = None
        self._started: list[float] = []
        try:
            from triton import knobs

            runtime = knobs.runtime
            before, after = runtime.jit_cache_hook, runtime.jit_post_compile_hook
        except (ImportError, AttributeError):
            return
        self.seconds = 0.0

        def cache_hook(*args, **kwargs):
            skip = before(*args, **kwargs) if before else None
            if not skip:
                self._started.append(time.perf_counter())
            return skip

        def post_compile_hook(*args, **kwargs):
            if self._started:
                self.seconds += time.perf_counter() - self._started.pop()
            return after(*args, **kwargs) if after else None

        runtime.jit_cache_hook, runtime.jit_post_compile_hook = cache_hook, post_compile_hook


class _Timing:
    """Seconds per stage of one record: ``stage`` and ``gate`` store the time since ``began``,
    ``end`` writes the timing and the total into the record."""

    def __init__(self):
        self.started = time.perf_counter()
        self.times: dict = {"gates_s": {}}

    def stage(self, key: str, began: float) -> float:
        seconds = time.perf_counter() - began
        self.times[key] = seconds
        return seconds

    def gate(self, gate: str, began: float) -> float:
        seconds = time.perf_counter() - began
        self.times["gates_s"][gate] = seconds
        return seconds

    def end(self, record: dict) -> dict:
        total = time.perf_counter() - self.started
        record["seconds"] = total
        record["timing"] = {**self.times, "total_s": total}
        return record


def _judge(request: dict, events: _Events, part: str) -> dict:
    timing = _Timing()
    device_name = request.get("device", "cpu")
    settings = dict(request.get("settings") or {})
    settings.setdefault("seed", request.get("seed", 0))
    settings["device"] = device_name
    gates = list(request.get("gates") or GATE_IDS)
    record: dict = {"kcv_record": 1, "reference": request.get("reference", ""),
                    "candidate": {"path": request.get("candidate", "")}, "device": device_name,
                    "settings": settings, "gates": []}

    events.stage("load")
    startup_began = time.perf_counter()
    if not device_name.startswith("cuda"):
        # Triton kernels run on a CPU only under Triton's interpreter.
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if part == "gates" and device_name.startswith("cuda"):
        from . import allocator
        from .task import memory_cap_bytes

        # Freed blocks stay poisoned in a quarantine, and every call checks all of it: two of the
        # largest calls the gates make are enough to keep a freed reference output from being
        # handed out again, without copying back hundreds of MiB at every call.
        os.environ.setdefault("KCV_QUARANTINE_BYTES", str(max(2 * memory_cap_bytes(settings), 32 << 20)))
        allocator.install_cuda_allocator()
    import torch

    from . import _core
    from .executor import Executor
    from .kernelbench import LoadError, failed_check, open_session, standard_check
    from .reference import STRICT_FLAGS, precision_flags, set_precision_flags, standard_check_flags
    from .task import describe

    # The imports (torch, the allocator) are kcv's fixed cost per candidate; what follows is the
    # candidate's build, which benchmarks leave out.
    timing.stage("startup_s", startup_began)
    load_began = time.perf_counter()
    record["candidate"]["xxh3_128"] = _core.file_hash(request.get("candidate", ""))
    # kcv's defaults before the candidate loads: no reduced precision. What the candidate's
    # module sets at import is its own ambient state and stays in force for its calls.
    set_precision_flags(STRICT_FLAGS)
    device = torch.device(device_name)
    build_dir = settings.pop("build_dir", None) or tempfile.mkdtemp(prefix="kcv-build-")
    try:
        session = open_session(request["reference"], request["candidate"], device, build_dir,
                               backend=settings.get("backend"))
    except LoadError as e:
        timing.stage("load_s", load_began)
        record["error"] = {"code": "load-failed" if e.code.startswith("candidate") else "bad-reference",
                           "message": str(e)}
        record["gates"] = [_gate_error(g, record["error"]["code"], str(e)) for g in gates]
        record["standard_check"] = {**failed_check(str(e)), "compiled": False}
        timing.end(record)
        return json.loads(_core.normalise_record(json.dumps(sanitize(record))))
    timing.stage("load_s", load_began)
    candidate_flags = precision_flags()

    compiles = _TritonCompileClock() if session.candidate.backend == "triton" else None
    if part in ("all", "standard") and _probe_override(settings) is None:
        events.stage("standard_check")
        began = time.perf_counter()
        # As in KernelBench: PyTorch's default flags (cuDNN in TF32 on a GPU) and the candidate's own.
        set_precision_flags(standard_check_flags(candidate_flags))
        try:
            record["standard_check"] = {**standard_check_sharing_device(session, standard_check), "compiled": True}
        finally:
            set_precision_flags(candidate_flags)
        timing.stage("standard_check_s", began)
        # What a clock decides goes with the timing, so that the record stays a function of its inputs.
        timing.times["standard_check_phases_s"] = record["standard_check"].pop("phases_s", {})
        if compiles is not None and compiles.seconds is not None:
            timing.times["standard_check_compile_s"] = compiles.seconds
        if part == "standard":
            return timing.end(record)

    events.stage("reference")
    began = time.perf_counter()
    try:
        task = describe(session.problem.source, session.problem.path, device, settings)
    except Exception as e:
        timing.stage("reference_s", began)
        record["error"] = {"code": "bad-reference", "message": f"cannot describe the task: {type(e).__name__}: {e}"}
        record["gates"] = [_gate_error(g, "bad-reference", record["error"]["message"]) for g in gates]
        timing.end(record)
        return json.loads(_core.normalise_record(json.dumps(sanitize(record))))
    timing.stage("reference_s", began)
    record["contract"] = task.contract.id
    record["task"] = {"contract": task.document, "notes": task.notes}
    executor = Executor(task, session.candidate.cls, device, candidate_flags, settings)
    # Whatever the standard check left behind is not the gates' business.
    del session

    for gate in GATE_IDS:
        if gate not in gates:
            continue
        events.stage(f"gate:{gate}")
        began = time.perf_counter()
        compiled_before = compiles.seconds if compiles is not None else None  # None: no hooks
        try:
            result = _judge_gate(gate, executor, request, settings, events)
        except Exception as e:
            result = _gate_error(gate, "worker-error", f"{type(e).__name__}: {e}")
        seconds = timing.gate(gate, began)
        if compiled_before is not None:
            timing.times.setdefault("gates_compile_s", {})[gate] = compiles.seconds - compiled_before
        result = json.loads(_core.normalise_gate(json.dumps(sanitize(result))))
        events.send({"event": "gate", "result": result, "seconds": seconds})
        record["gates"].append(result)
        set_precision_flags(candidate_flags)
    timing.end(record)
    return json.loads(_core.normalise_record(json.dumps(sanitize(record))))


# --------------------------------------------------------------------------------------------
# The relay


@functools.cache
def _child_context():
    """Children come from a fork server that has imported what every child needs (torch,
    torch._dynamo, which shape inference pulls in, and kcv's own modules) and has never touched
    CUDA: a child starts as clean as a spawned interpreter, without paying seconds of imports for
    every candidate. Triton is left out: it reads its interpreter switch from the environment,
    which the child sets."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch._dynamo", "kcv._core", "kcv.executor", "kcv.kernelbench",
                                "kcv.reference", "kcv.task", "kcv.environment", "kcv.allocator"])
    return ctx


def _run_child(request: dict, part: str, out) -> dict | None:
    """Runs one child to its end, forwarding its events; its record, or None if it died."""
    ctx = _child_context()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_main, args=(request, send, part), daemon=True)
    child.start()
    send.close()
    record = None
    while True:
        try:
            if not receive.poll(0.2):
                if not child.is_alive() and not receive.poll(0):
                    break
                continue
            line = receive.recv()
        except (EOFError, OSError):
            break
        event = json.loads(line)
        if event.get("event") == "record":
            record = event["record"]
            if part == "standard":
                continue
        out.write(line + "\n")
        out.flush()
        if record is not None:
            break
    child.join()
    if record is None:
        code = child.exitcode
        why = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        print(f"kcv.worker: the candidate's process {why}", file=sys.stderr, flush=True)
    return record


def handle(request: dict, out=sys.stdout) -> bool:
    """Judges one request; False when a child died (the relay must then end)."""
    settings = dict(request.get("settings") or {})
    own_build_dir = not settings.get("build_dir")
    if own_build_dir:
        # One private build directory per candidate, shared by its children: a load_inline
        # extension compiles once.
        settings["build_dir"] = tempfile.mkdtemp(prefix="kcv-build-")
    request = {**request, "settings": settings}
    try:
        if str(request.get("device", "cpu")).startswith("cuda"):
            if _probe_override(settings) is not None:
                # One probe re-run: no standard check, the gates' child alone.
                return _run_child(request, "gates", out) is not None
            standard = _run_child(request, "standard", out)
            if standard is None:
                return False
            return _run_child_with_standard(request, standard, out)
        return _run_child(request, "all", out) is not None
    finally:
        if own_build_dir:
            shutil.rmtree(settings["build_dir"], ignore_errors=True)


def _join_timing(standard: dict, gates: dict) -> dict:
    """One timing for the two children: each loaded the candidate, and the total is both."""
    joined = dict(gates)
    for key in ("startup_s", "load_s"):
        if key in standard:
            joined[key] = standard[key] + gates.get(key, 0.0)
    for key in ("standard_check_s", "standard_check_phases_s", "standard_check_compile_s"):
        if key in standard:
            joined[key] = standard[key]
    joined["total_s"] = standard.get("total_s", 0.0) + gates.get("total_s", 0.0)
    return joined


def _run_child_with_standard(request: dict, standard: dict, out) -> bool:
    """The gates' child; the standard check (and its timing) from the other child joins its record."""

    class Joiner:
        def write(self, line: str) -> None:
            text = line.rstrip("\n")
            if text:
                event = json.loads(text)
                if event.get("event") == "record":
                    record = event["record"]
                    if standard.get("standard_check") is not None:
                        record["standard_check"] = standard["standard_check"]
                    record["timing"] = _join_timing(standard.get("timing", {}), record.get("timing", {}))
                    record["seconds"] = record["timing"]["total_s"]
                    text = json.dumps(event)
                out.write(text + "\n")

        def flush(self) -> None:
            out.flush()

    return _run_child(request, "gates", Joiner()) is not None


def main() -> None:
    _die_with_parent()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as e:
            print(f"kcv.worker: unreadable request: {e}", file=sys.stderr, flush=True)
            continue
        if not handle(request):
            sys.exit(3)


if __name__ == "__main__":
    main()
