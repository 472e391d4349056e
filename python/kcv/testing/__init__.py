"""Kernel verification inside a test suite: ``assert_kernel`` and the ``kcv_verify`` fixture.

Thin by design: kcv (libkcv, through :func:`kcv.verify_native` or :func:`kcv.verify`) judges the
candidate; this module only turns a record whose gates failed into an ``AssertionError`` laid out
like ``torch.testing.assert_close``'s::

    Kernel verification failed!

    Gate ORD-01 (reordered-reduction tolerance) failed: 1 of 5 probes outside the error model ...
    Signature: error-bound
    Probe: ORD-01/task/seed=0
    Mismatched elements: 12 / 4096 (0.3%)
    Greatest absolute difference: 0.0123 at index (3, 17) (up to 0.0038 allowed)
    Expected 1.5 (0x3fc00000), got 1.512 (0x3fc18937) at index (3, 17)
    Replay: kcv verify --contract ... --gate ORD-01 --probe ORD-01/task/seed=0

Native candidates (a shared library exporting ``kcv_kernel``) are named with a contract;
KernelBench-style modules (a candidate defining ``ModelNew``) with their problem module.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["KernelVerificationError", "assert_kernel", "format_failures", "verify_candidate"]

# Profiles and the tolerance-free floor are libkcv's: the record carries the floor per profile.
PROFILES = ("strict", "ftz", "fast-math", "relaxed")


class KernelVerificationError(AssertionError):
    """A kernel failed verification; ``record`` is kcv's record and ``gates`` the failed ids."""

    def __init__(self, message: str, record: dict, gates: Sequence[str]):
        super().__init__(message)
        self.record = record
        self.gates = list(gates)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return None


def _fmt(value: Any) -> str:
    x = _number(value)
    if x is None:
        return "nan" if value is None else str(value)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.6g}"


def _index(coords: Any) -> str:
    if not isinstance(coords, list) or not coords:
        return ""
    return "(" + ", ".join(str(c) for c in coords) + ")"


def _gate_lines(gate: dict) -> list[str]:
    """The lines explaining one failed gate, from its first piece of evidence."""
    name = gate.get("name", "")
    outcome = "could not be judged" if gate.get("verdict") == "error" else "failed"
    head = f"Gate {gate.get('id', '?')}" + (f" ({name})" if name else "") + f" {outcome}"
    reason = gate.get("reason", "")
    lines = [head + (f": {reason}" if reason else "")]
    if gate.get("signature"):
        lines.append("Signature: " + ", ".join(gate["signature"]))
    if gate.get("code"):
        lines.append(f"Code: {gate['code']}")
    evidence = gate.get("evidence") or []
    if not evidence:
        return lines
    ev = evidence[0]
    detail = ev.get("detail") or {}
    probe = ev.get("probe", "")
    if probe:
        lines.append(f"Probe: {probe}")
    where = _index(ev.get("worst_coords"))
    mismatched = detail.get("violations", detail.get("count"))
    total = detail.get("compared")
    if total is None:
        per_probe = ((gate.get("detail") or {}).get("probes") or {}).get(probe) or {}
        total = per_probe.get("checked")
    if isinstance(mismatched, int) and isinstance(total, int) and total > 0:
        lines.append(f"Mismatched elements: {mismatched} / {total} ({100.0 * mismatched / total:.1f}%)")
    elif isinstance(mismatched, int):
        lines.append(f"Mismatched elements: {mismatched}")
    if "err" in detail and where:
        allowed = f" (up to {_fmt(detail['tau'])} allowed)" if _number(detail.get("tau")) is not None else ""
        lines.append(f"Greatest absolute difference: {_fmt(detail['err'])} at index {where}{allowed}")
    if ev.get("actual_bits") or ev.get("expected_bits"):
        lines.append(
            f"Expected {_fmt(ev.get('expected'))} ({ev.get('expected_bits', '')}), "
            f"got {_fmt(ev.get('actual'))} ({ev.get('actual_bits', '')})" + (f" at index {where}" if where else "")
        )
    if ev.get("signature") and ev.get("signature") != reason:
        lines.append(ev["signature"])
    if ev.get("replay"):
        lines.append(f"Replay: {ev['replay']}")
    return lines


def _failed(record: dict, gates: Iterable[str] | None, profile: str) -> list[str]:
    """Gates that fail the assertion, among those asked for: failures, and gates kcv could not
    judge (an assertion that cannot be checked does not pass). Under a profile other than
    strict, a tolerance-free failure counts only where libkcv's record puts the candidate under
    that profile's floor."""
    wanted = set(gates) if gates is not None else None
    floor = (record.get("floor") or {}).get(profile, True)
    out = []
    for g in record.get("gates", []):
        if wanted is not None and g.get("id") not in wanted:
            continue
        if g.get("verdict") == "error":
            out.append(g["id"])
            continue
        if g.get("verdict") != "fail":
            continue
        if profile != "strict" and g.get("tolerance_free") and not floor:
            continue
        out.append(g["id"])
    return out


def format_failures(record: dict, gate_ids: Sequence[str]) -> str:
    """The assertion message for these failed gates of a record."""
    blocks = ["Kernel verification failed!"]
    error = record.get("error")
    if error:
        blocks.append(f"The candidate could not be judged ({error.get('code', 'error')}): {error.get('message', '')}")
    by_id = {g.get("id"): g for g in record.get("gates", [])}
    for gid in gate_ids:
        blocks.append("\n".join(_gate_lines(by_id.get(gid, {"id": gid}))))
    who = record.get("candidate", {})
    path = who.get("path", "") if isinstance(who, dict) else str(who)
    blocks.append(f"Contract: {record.get('contract', '?')}; candidate: {path}")
    return "\n\n".join(blocks)


def verify_candidate(
    candidate: str | os.PathLike,
    contract: str | None = None,
    *,
    reference: str | os.PathLike | None = None,
    seed: int = 0,
    quick: bool = False,
    device: str = "cpu",
    gates: Sequence[str] | None = None,
) -> dict:
    """kcv's record for a candidate: a native library with ``contract``, or a KernelBench module
    with ``reference`` (its problem module)."""
    import kcv

    if (contract is None) == (reference is None):
        raise ValueError("give a contract (native candidate) or a reference problem module, not both")
    if reference is not None:
        return dict(kcv.verify(reference, candidate, device=device, seed=seed, quick=quick,
                               gates=list(gates) if gates is not None else None))
    return kcv.verify_native(contract, str(candidate), seed=seed, quick=quick)


def assert_kernel(
    candidate: str | os.PathLike,
    contract: str | None = None,
    *,
    reference: str | os.PathLike | None = None,
    seed: int = 0,
    quick: bool = False,
    device: str = "cpu",
    gates: Sequence[str] | None = None,
    profile: str = "strict",
    record: dict | None = None,
) -> dict:
    """Verifies a candidate and raises :class:`KernelVerificationError` (an ``AssertionError``)
    if a gate fails or the candidate cannot be judged; returns the record otherwise.

    ``gates`` limits the assertion to these gate ids (every gate still runs for native
    candidates). ``profile`` ("strict", "ftz", "fast-math", "relaxed") accepts the signature
    classes that profile accepts, as libkcv's record states them. ``record`` asserts on a record
    already made instead of verifying again.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {', '.join(PROFILES)}")
    if record is None:
        record = verify_candidate(candidate, contract, reference=reference, seed=seed, quick=quick,
                                  device=device, gates=gates)
    failed = _failed(record, gates, profile)
    if record.get("error"):
        # The record's error explains every gate it left unjudged.
        by_id = {g.get("id"): g for g in record.get("gates", [])}
        failed = [g for g in failed if by_id.get(g, {}).get("verdict") == "fail"]
    if record.get("error") or failed:
        raise KernelVerificationError(format_failures(record, failed), record, failed)
    return record
