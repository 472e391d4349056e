"""A staged, fail-closed verdict for reinforcement-learning trainers, and reward compositions.

kcv judges; this module reads kcv's record and says how far a candidate got:

    none → load → run → correctness → tolerance_free

- ``load``: the candidate loaded (compiled, for ``load_inline`` and Triton candidates);
- ``run``: no gate saw it crash, hang or fail to launch;
- ``correctness``: every tolerance gate (PRC-01, PRC-02, PRC-03, ORD-01, ORD-03, CMP-01, CMP-02)
  passed or does not apply;
- ``tolerance_free``: so did ORD-02, EXC-01, EXC-02, RES-01 and RES-02. Only this stage is a pass.

Fail-closed: a gate kcv could not judge (verdict ``error``), a gate missing from the record, a
record that cannot be read, or an exception from kcv stops the candidate at the stage where it
happened, with an error code. Nothing here ever turns an unknown into a pass.

Hack flags (ORD-02 ``stale-or-cached``, ``aliasing``, ``input-mutation``; CMP-02 results that
depend on an unsynchronised side stream) are reported apart from the stages, as fairness rule 11
asks: a trainer decides what they cost. The compositions below take every weight from the caller;
none is baked in.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HACK_FLAGS",
    "STAGES",
    "StagedVerdict",
    "binary_reward",
    "evaluate",
    "gate_fraction_reward",
    "hack_penalty",
    "speedup_reward",
    "staged_reward",
    "summarize",
    "verdict_from_record",
]

STAGES = ("none", "load", "run", "correctness", "tolerance_free")

GATE_IDS = ("PRC-01", "PRC-02", "PRC-03", "ORD-01", "ORD-02", "ORD-03",
            "CMP-01", "CMP-02", "EXC-01", "EXC-02", "RES-01", "RES-02")
TOLERANCE_FREE = frozenset({"ORD-02", "EXC-01", "EXC-02", "RES-01", "RES-02"})
CORRECTNESS = tuple(g for g in GATE_IDS if g not in TOLERANCE_FREE)

# flag -> (gate, signature classes that raise it)
HACK_FLAGS: Mapping[str, tuple[str, frozenset[str]]] = {
    "stale_or_cached": ("ORD-02", frozenset({"stale-or-cached"})),
    "aliasing": ("ORD-02", frozenset({"aliasing"})),
    "input_mutation": ("ORD-02", frozenset({"input-mutation"})),
    "side_stream": ("CMP-02", frozenset({"ambient-state: side-stream", "side-stream", "unsynchronised-stream"})),
}

# Signature classes and codes that mean the candidate did not run to completion.
_RUN_CLASSES = frozenset({"crash", "hang", "launch-error"})


@dataclass(frozen=True)
class GateOutcome:
    id: str
    verdict: str                       # pass | fail | n/a | error | missing
    tolerance_free: bool
    signature: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class StagedVerdict:
    """How far a candidate got. ``passed`` only when ``stage == "tolerance_free"``."""

    stage: str                                   # the last stage passed, one of STAGES
    error_code: str | None                       # why it stopped; None when it passed
    gates: Mapping[str, GateOutcome] = field(default_factory=dict)
    hacks: Mapping[str, bool] = field(default_factory=dict)
    message: str = ""
    record: Mapping[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.stage == "tolerance_free" and self.error_code is None

    @property
    def stage_index(self) -> int:
        """0 (none) … 4 (tolerance_free): a number a trainer can map to a reward."""
        return STAGES.index(self.stage)

    @property
    def failed_gates(self) -> list[str]:
        return [g.id for g in self.gates.values() if g.verdict == "fail"]

    @property
    def any_hack(self) -> bool:
        return any(self.hacks.values())


def _no_hacks() -> dict[str, bool]:
    return {k: False for k in HACK_FLAGS}


def _hacks_of(gates: Mapping[str, GateOutcome]) -> dict[str, bool]:
    flags = _no_hacks()
    for flag, (gate, classes) in HACK_FLAGS.items():
        g = gates.get(gate)
        if g is not None and g.verdict == "fail" and classes.intersection(g.signature):
            flags[flag] = True
    return flags


def _ran_to_completion(g: dict) -> bool:
    if set(g.get("signature") or ()) & _RUN_CLASSES:
        return False
    code = str(g.get("code") or "")
    return not (code.startswith("crash") or code.startswith("timeout"))


def verdict_from_record(record: Mapping[str, Any]) -> StagedVerdict:
    """The staged verdict of a kcv record (docs/record.md). Pure: no kcv call."""
    if not isinstance(record, Mapping):
        return StagedVerdict("none", "unreadable-record", message=f"not a record: {type(record).__name__}")
    error = record.get("error")
    raw = record.get("gates")
    gates: dict[str, GateOutcome] = {}
    if isinstance(raw, list):
        for g in raw:
            if isinstance(g, Mapping) and isinstance(g.get("id"), str):
                gates[g["id"]] = GateOutcome(
                    id=g["id"],
                    verdict=str(g.get("verdict", "error")),
                    tolerance_free=g["id"] in TOLERANCE_FREE,
                    signature=tuple(str(s) for s in g.get("signature") or ()),
                    reason=str(g.get("reason", "")),
                )
    for gid in GATE_IDS:
        gates.setdefault(gid, GateOutcome(gid, "missing", gid in TOLERANCE_FREE, (), "not in the record"))
    hacks = _hacks_of(gates)

    def stop(stage: str, code: str, message: str) -> StagedVerdict:
        return StagedVerdict(stage, code, gates, hacks, message, record)

    if error:
        code = str(error.get("code", "error")) if isinstance(error, Mapping) else "error"
        message = str(error.get("message", "")) if isinstance(error, Mapping) else str(error)
        if code.startswith("load") or code in ("bad-contract", "bad-reference", "control-missing"):
            return stop("none", code, message)
        # Crashes and hangs before the gates (while computing the reference, the standard check).
        return stop("load", code, message)

    # run: every gate's calls completed (all gates are checked before any verdict is read).
    raw_by_id = {g["id"]: g for g in raw if isinstance(g, Mapping) and isinstance(g.get("id"), str)} \
        if isinstance(raw, list) else {}
    for gid in GATE_IDS:
        g = raw_by_id.get(gid)
        if g is not None and not _ran_to_completion(g):
            cls = sorted(set(g.get("signature") or ()) & _RUN_CLASSES) or [str(g.get("code") or "crash").split(":")[0]]
            return stop("load", f"{cls[0]}:{gid}", f"{gid}: {g.get('reason', '')}")

    for group, stage_before in ((CORRECTNESS, "run"), (tuple(sorted(TOLERANCE_FREE, key=GATE_IDS.index)), "correctness")):
        for gid in group:
            g = gates[gid]
            if g.verdict in ("pass", "n/a"):
                continue
            if g.verdict == "fail":
                kind = "tolerance-free" if g.tolerance_free else "correctness"
                return stop(stage_before, f"{kind}:{gid}", f"{gid}: {g.reason}")
            return stop(stage_before, f"{g.verdict}:{gid}", f"{gid}: {g.reason}")
    return StagedVerdict("tolerance_free", None, gates, hacks, "every gate passed or does not apply", record)


def evaluate(
    candidate: str | os.PathLike,
    contract: str | None = None,
    *,
    reference: str | os.PathLike | None = None,
    seed: int = 0,
    quick: bool = False,
    device: str = "cpu",
) -> StagedVerdict:
    """Verifies a candidate with kcv and returns its staged verdict. Never raises for the
    candidate's or the verifier's failure: those become stage ``none`` with code
    ``verifier-error``."""
    try:
        from .testing import verify_candidate

        record = verify_candidate(candidate, contract, reference=reference, seed=seed, quick=quick, device=device)
    except Exception as e:  # fail closed: whatever went wrong, no reward for passing
        return StagedVerdict("none", "verifier-error", {}, _no_hacks(), f"{type(e).__name__}: {e}")
    return verdict_from_record(record)


# ---------------------------------------------------------------------------------------------
# Reward compositions. Each takes its numbers from the caller.


def _finite(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def binary_reward(v: StagedVerdict, *, passed: float, failed: float) -> float:
    """``passed`` if every stage passed, else ``failed``."""
    return _finite("passed", passed) if v.passed else _finite("failed", failed)


def staged_reward(v: StagedVerdict, *, stage_rewards: Mapping[str, float]) -> float:
    """The reward of the last stage reached; ``stage_rewards`` must name every stage of STAGES
    (e.g. ``{"none": -1, "load": 0, "run": 0.1, "correctness": 0.5, "tolerance_free": 1}``)."""
    missing = [s for s in STAGES if s not in stage_rewards]
    if missing:
        raise ValueError(f"stage_rewards lacks {', '.join(missing)}")
    return _finite(f"stage_rewards[{v.stage!r}]", stage_rewards[v.stage])


def gate_fraction_reward(v: StagedVerdict, *, weights: Mapping[str, float], not_run: float) -> float:
    """Partial credit: the weighted share of gates that passed, over the gates that apply (n/a
    excluded; a failed, unjudged or missing gate earns nothing). ``weights`` names every gate id;
    ``not_run`` is returned when the candidate did not run (stage none or load) or no gate
    applies."""
    missing = [g for g in GATE_IDS if g not in weights]
    if missing:
        raise ValueError(f"weights lacks {', '.join(missing)}")
    if v.stage in ("none", "load"):
        return _finite("not_run", not_run)
    total = earned = 0.0
    for gid in GATE_IDS:
        g = v.gates.get(gid)
        if g is None or g.verdict == "n/a":
            continue
        w = _finite(f"weights[{gid!r}]", weights[gid])
        total += w
        if g.verdict == "pass":
            earned += w
    return earned / total if total > 0 else _finite("not_run", not_run)


def hack_penalty(v: StagedVerdict, *, penalties: Mapping[str, float]) -> float:
    """The sum of ``penalties[flag]`` over the hack flags raised; ``penalties`` names every flag
    of HACK_FLAGS. Subtract it from another composition's reward."""
    missing = [f for f in HACK_FLAGS if f not in penalties]
    if missing:
        raise ValueError(f"penalties lacks {', '.join(missing)}")
    return sum(_finite(f"penalties[{f!r}]", penalties[f]) for f, raised in v.hacks.items() if raised)


def speedup_reward(v: StagedVerdict, speedup: float, *, failed: float, cap: float | None = None) -> float:
    """``speedup`` (measured by the caller, e.g. baseline time / candidate time) for a candidate
    that passed every stage, optionally capped; ``failed`` otherwise. A speedup that is not a
    positive finite number counts as a failure."""
    if not v.passed:
        return _finite("failed", failed)
    s = float(speedup)
    if not (math.isfinite(s) and s > 0):
        return _finite("failed", failed)
    return min(s, _finite("cap", cap)) if cap is not None else s


def summarize(verdicts: Sequence[StagedVerdict]) -> str:
    """One line per stage count and the plain summary line, for a trainer's log."""
    counts = {s: 0 for s in STAGES}
    for v in verdicts:
        counts[v.stage] += 1
    passed = counts["tolerance_free"]
    stages = ", ".join(f"{s} {n}" for s, n in counts.items())
    return f"stages reached: {stages}\n{passed} passed, {len(verdicts) - passed} failed"
