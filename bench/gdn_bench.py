"""Times the kcv.gdn CUDA kernels against flash-linear-attention's Triton kernels (fla-core) at
GDN.md's shapes, K = V = 128, bf16: forward, and forward + backward, for each member both
implement. Timing: triton.testing.do_bench, median (and the 10th and 90th percentiles of the
repetitions, *_p10_p90 in the rows), warm-up discarded, gradients cleared between repetitions;
one process, one GPU, both implementations on the same inputs. Also reports the largest
difference between the two implementations' outputs at the first shape, relative to the largest
output, as a cross-check.

Each shape also checks kcv's forward and backward at that shape against the float64 oracle
(check_fwd_bwd; --no-check skips it): relative L2 error of o, dq, dk, dv and, where the member
has them, dg and dbeta, on batch 0, q/k head 0 and its value heads, within flash-linear-attention's
own bars (BARS).

--results writes one entry per member and shape with both fwd+bwd times: baseline_ms and kcv_ms
(fwd+bwd medians) and ratio = baseline_ms / kcv_ms, so a ratio above 1 means kcv is faster; the
same for the forward alone under "fwd". An existing file is updated: this run's entries replace
those of the same member and shape, the others stay. --rows-from rebuilds the table and those
entries from the log of an earlier run (or of several runs one after another), without a GPU.

    python bench/gdn_bench.py [--members gdn,kda,gla,ssd] [--json rows.json] [--results results.json]
    python bench/gdn_bench.py --rows-from gdn_bench.log --date 2026-11-30T17:45Z --results results.json

--impls picks what is timed: kcv, fla (fla-core's Triton kernels; FLA_FLASH_QLA=0 is set so that
fla's dispatcher cannot hand Gated DeltaNet to FlashQLA) and flashqla (FlashQLA's
chunk_gated_delta_rule, the fused Hopper backend fla dispatches Gated DeltaNet to when it is
installed; member gdn only; bench/flashqla_carry.py installs it where there is no network).
--check-baselines checks fla and FlashQLA against the float64 oracle as kcv is checked
(rel_l2_<impl>, pass_fwd_bwd_<impl> in the rows).

--profile adds kcv's CUDA time per kernel (torch.profiler), forward and forward + backward, to
each row and prints it after the table: where the time goes. Member "la" (linear attention) is
timed against fla's chunk_linear_attn with normalize=False, the plain recurrence.

Needs a CUDA device, libkcv_gdn_cuda.so (KCV_GDN_CUDA_LIB or a build tree) and fla-core.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

SHAPES = [  # (label, B, T, H, HV)
    ("B4 T4096 H32", 4, 4096, 32, 32),
    ("B1 T8192 H96", 1, 8192, 96, 96),
    ("B2 T16384 H16", 2, 16384, 16, 16),
    ("B1 T32768 H16/HV32", 1, 32768, 16, 32),
]
# Index 4, not one of GDN.md's four ('all' leaves it out): a long sequence with few heads, the
# shape at which the scans split along the sequence (gdn/cuda/gdn_launch.cuh, split_scans).
# KCV_GDN_SEGMENT_CHUNKS=-1 in the environment times kcv unsplit there.
FEW_HEADS = ("B1 T32768 H4", 1, 32768, 4, 4)
SELECTABLE = SHAPES + [FEW_HEADS]


def select_shapes(spec: str) -> list:
    """--shapes: 'all' (GDN.md's four) or comma-separated indices into SELECTABLE."""
    if spec == "all":
        return list(SHAPES)
    picked = []
    for part in spec.split(","):
        if not part.strip().isdigit() or int(part) >= len(SELECTABLE):
            raise ValueError(f"--shapes: {part!r} is neither a shape index (0-{len(SELECTABLE) - 1}) nor 'all'")
        picked.append(SELECTABLE[int(part)])
    return picked


K = V = 128
FLA_FUNCTIONS = {
    "la": "fla.ops.linear_attn.chunk_linear_attn",
    "gdn": "fla.ops.gated_delta_rule.chunk_gated_delta_rule",
    "kda": "fla.ops.kda.chunk_kda",
    "gla": "fla.ops.gla.chunk_gla",
    "ssd": "fla.ops.simple_gla.chunk_simple_gla",
}
ORACLE_NAMES = {"la": "linear_attention"}  # the oracle's name where the bench's is shorter
# flash-linear-attention's bars for its chunked kernels against a reference, as relative L2 error
# ||x - x*|| / ||x*|| (fla.utils.get_err_ratio; tests/ops/test_gated_delta.py, test_chunk).
BARS = {"o": 0.005, "dq": 0.008, "dk": 0.008, "dv": 0.008, "dg": 0.02, "dbeta": 0.02}
# Tokens times value heads the oracle checks per shape: its backward costs about 0.3 ms per token
# and value head at K = V = 128 on one host core, so this keeps a check to about 2.5 s.
CHECK_TOKENS = 8192


def import_gdn():
    """kcv.gdn, or the package straight from the source tree where kcv itself is not built."""
    try:
        import kcv.gdn as gdn

        return gdn
    except ImportError:
        path = Path(__file__).resolve().parents[1] / "python" / "kcv" / "gdn"
        spec = importlib.util.spec_from_file_location("kcv_gdn", path / "__init__.py",
                                                      submodule_search_locations=[str(path)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["kcv_gdn"] = module
        spec.loader.exec_module(module)
        return module


def make_inputs(member: str, B: int, T: int, H: int, HV: int, seed: int = 0, device: str = "cuda"):
    gen = torch.Generator(device=device).manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen, device=device)  # noqa: E731
    q = rnd(B, T, H, K)
    k = F.normalize(rnd(B, T, H, K), dim=-1)
    v = rnd(B, T, HV, V)
    g = None
    if member in ("ssd", "gdn"):
        g = F.logsigmoid(rnd(B, T, HV)) / 16
    elif member in ("gla", "kda"):
        g = F.logsigmoid(rnd(B, T, HV, K)) / 16
    beta = torch.sigmoid(rnd(B, T, HV)).bfloat16() if member in ("gdn", "kda") else None
    return q.bfloat16(), k.bfloat16(), v.bfloat16(), g, beta


def kcv_function(member: str, gdn):
    """kcv's op as a function of (q, k, v, g, beta) returning o."""
    return {
        "gdn": lambda q, k, v, g, b: gdn.chunk_gated_delta_rule(q, k, v, g, b)[0],
        "kda": lambda q, k, v, g, b: gdn.chunk_kda(q, k, v, g, b)[0],
        "gla": lambda q, k, v, g, b: gdn.chunk_gla(q, k, v, g)[0],
        "ssd": lambda q, k, v, g, b: gdn.chunk_simple_gla(q, k, v, g)[0],
        "la": lambda q, k, v, g, b: gdn.chunk_linear_attn(q, k, v)[0],
    }[member]


def fla_function(member: str):
    """fla's op, likewise; fla's GLA and simple GLA take no grouped value heads, so q, k are repeated."""
    module, name = FLA_FUNCTIONS[member].rsplit(".", 1)
    fn = getattr(importlib.import_module(module), name)

    def repeat(q, k, v):
        r = v.shape[2] // q.shape[2]
        return (q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)) if r > 1 else (q, k)

    if member in ("gdn", "kda"):
        return lambda q, k, v, g, b: fn(q, k, v, g, b, scale=K ** -0.5)[0]
    if member == "la":  # fla normalises linear attention's output by default; the recurrence does not
        return lambda q, k, v, g, b: fn(*repeat(q, k, v), v, scale=K ** -0.5, normalize=False)[0]
    return lambda q, k, v, g, b: fn(*repeat(q, k, v), v, g, scale=K ** -0.5)[0]


def flashqla_function(member: str):
    """FlashQLA's op (Gated DeltaNet only), likewise."""
    if member != "gdn":
        return None
    import flash_qla

    return lambda q, k, v, g, b: flash_qla.chunk_gated_delta_rule(q, k, v, g, b, scale=K ** -0.5)[0]


# The keys a check writes into a row, for kcv ("") and after each baseline's suffix.
BASELINE_SUFFIXES = ("_fla", "_flashqla")
CHECK_KEYS = [key + suffix for suffix in ("", *BASELINE_SUFFIXES) for key in ("rel_l2", "pass_fwd_bwd", "check_error")]


def rel_l2(x, ref) -> float:
    """||x - ref|| / ||ref|| in float64."""
    x, ref = (torch.as_tensor(t).detach().double().cpu() for t in (x, ref))
    norm = ref.norm().item()
    if not norm > 0:
        raise ValueError("the reference is all zero, the comparison would prove nothing")
    return (x - ref).norm().item() / norm


def within_bars(errors: dict) -> bool:
    return all(errors[name] <= BARS[name] for name in errors)  # NaN fails


def check_fwd_bwd(member: str, fn, inputs, window: int, seed: int = 1) -> dict:
    """fn's o and gradients at the full shape against the float64 oracle on batch 0, q/k head 0
    and its r = HV/H value heads (value head j reads q/k head j // r), tokens [0, window).

    A value head's recurrence reads no other value head's g, beta or v, so the slice is exact for
    every member; dq and dk of head 0 sum over its r value heads, as the oracle's do. do is random
    on the window and zero after it, so the slice's gradients depend on the window alone: the
    oracle runs on the window's inputs (upcast from exactly what fn saw), and fn's gradients after
    it must be zero. fn's o after the window is not checked."""
    from kcv.gdn.oracle import oracle_backward, oracle_forward

    q, T, H = inputs[0], inputs[0].shape[1], inputs[0].shape[2]
    r = inputs[2].shape[2] // H
    leaves = [None if x is None else x.detach().requires_grad_(True) for x in inputs]
    o = fn(*leaves)
    do = torch.randn(o.shape, generator=torch.Generator(device=o.device).manual_seed(seed), device=o.device)
    do[:, window:] = 0
    do = do.to(o.dtype)
    o.backward(do)
    cut = lambda x, heads: None if x is None else x.detach()[:1, :window, :heads].cpu()  # noqa: E731
    part = [cut(x, heads) for x, heads in zip(inputs, (1, 1, r, r, r))]
    scale = q.shape[-1] ** -0.5
    member = ORACLE_NAMES.get(member, member)
    with ThreadPoolExecutor(2) as pool:  # the oracle releases the GIL, so forward and backward overlap
        fwd = pool.submit(oracle_forward, member, *part, scale=scale)
        bwd = pool.submit(oracle_backward, member, *part, do=cut(do, r), scale=scale)
        fwd, bwd = fwd.result(), bwd.result()
    errors = {"o": rel_l2(o[:1, :window, :r], fwd["o"])}
    for name, leaf, heads in zip(("dq", "dk", "dv", "dg", "dbeta"), leaves, (1, 1, r, r, r)):
        if name in bwd:
            ref = torch.zeros((1, T) + bwd[name].shape[2:], dtype=torch.float64)
            ref[:, :window] = torch.from_numpy(bwd[name])
            errors[name] = rel_l2(leaf.grad[:1, :, :heads], ref)
    return errors


# do_bench's budgets in ms (it repeats a call as many times as fit): one second of repetitions, so
# that a 100 ms forward+backward is still timed about ten times.
REPS = {"warmup": 200, "rep": 1000}


def time_ms(fn, inputs, backward: bool) -> tuple[float, list[float]]:
    """(median, [10th, 90th percentile]) of do_bench's repetitions, in ms."""
    import triton

    if not backward:
        with torch.no_grad():
            times = triton.testing.do_bench(lambda: fn(*inputs), return_mode="all", **REPS)
    else:
        leaves = [x.detach().requires_grad_(True) if x is not None else None for x in inputs]
        do = torch.randn_like(fn(*inputs))

        def step():
            fn(*leaves).backward(do)

        times = triton.testing.do_bench(step, return_mode="all", **REPS,
                                        grad_to_none=[x for x in leaves if x is not None])
    deciles = statistics.quantiles(times, n=10) if len(times) > 1 else [times[0]] * 9
    return statistics.median(times), [deciles[0], deciles[-1]]


def kernel_name(key: str) -> str:
    """'void kcv::gdn::cuda::state_scan_tc<1, true, __nv_bfloat16>(kcv::gdn::cuda::Dims, ...)' -> 'state_scan_tc'."""
    depth, kept = 0, []
    for ch in key.removeprefix("void "):
        if ch == "(" and depth == 0 and kept:
            break
        depth += (ch == "<") - (ch == ">")
        if depth == 0 and ch != ">":
            kept.append(ch)
    return "".join(kept).strip().split("::")[-1]


def kernel_profile(fn, inputs, backward: bool, repeats: int = 3) -> dict:
    """CUDA time per kernel (ms per call, summed over its launches) of fn, or of fn and its backward,
    from torch.profiler over `repeats` calls after one warm-up call. Kernel names are cut to the
    function's name (no namespace, template arguments or parameters)."""
    from torch.profiler import ProfilerActivity, profile

    leaves = [x.detach().requires_grad_(backward) if x is not None else None for x in inputs]
    do = torch.randn_like(fn(*inputs)) if backward else None

    def call():
        if backward:
            fn(*leaves).backward(do)
        else:
            with torch.no_grad():
                fn(*leaves)

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            call()
        torch.cuda.synchronize()
    times: dict = {}
    for event in prof.key_averages():
        device_us = getattr(event, "device_time_total", None)
        if device_us is None:
            device_us = getattr(event, "cuda_time_total", 0)
        if device_us <= 0 or event.key.startswith(("cudaLaunch", "cudaDevice", "cudaStream")):
            continue
        name = kernel_name(event.key)
        times[name] = times.get(name, 0.0) + device_us / 1000 / repeats
    return dict(sorted(times.items(), key=lambda item: -item[1]))


def print_profile(rows: list) -> None:
    for r in rows:
        for phase in ("fwd", "fwdbwd"):
            prof = r.get(f"profile_{phase}")
            if not prof:
                continue
            total = sum(prof.values())
            print(f"\n{r['member']} {r['shape']} {phase}: {total:.3f} ms of kernels")
            for name, ms in prof.items():
                print(f"  {ms:9.3f} ms {100 * ms / total:5.1f}%  {name}")


GUARD_KEY = "fla_guard_bypassed"  # on rows read from a log: whether that row's process bypassed fla's guard
# The members whose fla function reaches the guarded code, fla.ops.common.chunk_o.chunk_bwd_dqkwg with a
# gate (fla-core 0.6.0: chunk_gated_delta_rule and chunk_simple_gla). Bypassing the guard changes
# nothing for the others, so only these rows are speed references.
FLA_GUARDED = frozenset({"gdn", "ssd"})


def baseline_name(member: str, versions: dict, bypassed: bool) -> str:
    name = (f"fla-core {versions.get('fla-core', '(version not in log)')} {FLA_FUNCTIONS[member]}, "
            f"Triton {versions.get('triton', '(version not in log)')}")
    return name + ("; gated backward guard bypassed, speed reference only" if bypassed else "")


def results(rows: list, device: str, date: str, versions: dict, bypassed: bool) -> list:
    """One entry per row with both fwd+bwd times; ratio = baseline_ms / kcv_ms (above 1: kcv faster)."""
    ratio = lambda base, ours: float(f"{base / ours:.4g}")  # noqa: E731
    out = []
    for r in rows:
        if "kcv_fwdbwd_ms" not in r or "fla_fwdbwd_ms" not in r:
            continue
        entry = {"member": r["member"], "shape": r["shape"],
                 "baseline": baseline_name(r["member"], versions,
                                           r.get(GUARD_KEY, bypassed) and r["member"] in FLA_GUARDED),
                 "baseline_ms": r["fla_fwdbwd_ms"], "kcv_ms": r["kcv_fwdbwd_ms"],
                 "ratio": ratio(r["fla_fwdbwd_ms"], r["kcv_fwdbwd_ms"]), "pass_fwd_bwd": r.get("pass_fwd_bwd")}
        if "kcv_fwd_ms" in r and "fla_fwd_ms" in r:
            entry["fwd"] = {"baseline_ms": r["fla_fwd_ms"], "kcv_ms": r["kcv_fwd_ms"],
                            "ratio": ratio(r["fla_fwd_ms"], r["kcv_fwd_ms"])}
        spreads = {"baseline_p10_p90": "fla_fwdbwd_p10_p90", "kcv_p10_p90": "kcv_fwdbwd_p10_p90"}
        entry.update({key: r[src] for key, src in spreads.items() if src in r})
        entry.update({key: r[key] for key in ("check_window", *CHECK_KEYS) if key in r})
        if "pass_fwd_bwd" not in r and "check_error" not in r:
            entry["check_error"] = "no correctness check in this run"
        if "flashqla_fwdbwd_ms" in r:
            entry["flashqla"] = {"fwdbwd_ms": r["flashqla_fwdbwd_ms"],
                                 "ratio": ratio(r["flashqla_fwdbwd_ms"], r["kcv_fwdbwd_ms"])}
            if "flashqla_fwd_ms" in r:
                entry["flashqla"].update(fwd_ms=r["flashqla_fwd_ms"],
                                         fwd_ratio=ratio(r["flashqla_fwd_ms"], r["kcv_fwd_ms"]))
        entry.update(device=device, date=date)
        out.append(entry)
    return out


def read_log(path: str):
    """(rows, device, versions, bypassed) from the output of an earlier run, or of several runs one
    after another: each process prints the guard note (if it bypassed the guard) and then its device
    line, so each row carries whether its own process bypassed it (GUARD_KEY)."""
    rows, device, versions, bypassed = [], None, {}, False
    noted = process_bypassed = False
    for line in Path(path).read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a row cut short when the run was stopped
                continue
            rows.append({**row, GUARD_KEY: process_bypassed})
        elif m := re.match(r"device: (.+?), torch (\S+?)(?:, triton (\S+?), fla-core (\S+?))?(?:, flash-qla (\S+))?$",
                           line):
            device = m[1]
            versions = {n: x for n, x in zip(("torch", "triton", "fla-core", "flash-qla"), m.groups()[1:]) if x}
            process_bypassed, noted = noted, False
        elif line.startswith("note: fla's gated backward guard bypassed"):
            noted = bypassed = True
    if device is None:
        raise ValueError(f"{path}: no 'device: NAME, torch X' line")
    return rows, device, versions, bypassed


def merge_results(path: Path, entries: list) -> list:
    """The entries of an existing results file with those of this run put in place of the same
    member and shape (new ones appended): a run of a few shapes updates the file, it does not
    replace it."""
    if not path.exists():
        return entries
    try:
        kept = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"{path}: not a JSON results file ({e}); left as it is") from e
    if not isinstance(kept, list) or not all(isinstance(e, dict) and "member" in e and "shape" in e for e in kept):
        raise SystemExit(f"{path}: not a list of entries with 'member' and 'shape'; left as it is")
    fresh = {(e["member"], e["shape"]): e for e in entries}
    merged = [fresh.pop((e["member"], e["shape"]), e) for e in kept]
    return merged + list(fresh.values())


def utc_iso(text: str) -> str:
    """An ISO date-time in UTC; one without a zone is taken as UTC."""
    when = datetime.fromisoformat(text)
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).isoformat()


def print_table(rows: list) -> None:
    print("\n| member | shape | kcv fwd ms | fla fwd ms | kcv fwd+bwd ms | fla fwd+bwd ms | fla ÷ kcv, fwd+bwd "
          "| fwd+bwd check |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = lambda key: f"{r[key]:.3f}" if key in r else "—"  # noqa: E731
        both = "kcv_fwdbwd_ms" in r and "fla_fwdbwd_ms" in r
        ratio = f"{r['fla_fwdbwd_ms'] / r['kcv_fwdbwd_ms']:.3g}" if both else "—"
        check = {True: "pass", False: "FAIL", None: "—"}[r.get("pass_fwd_bwd")]
        if "rel_l2" in r:
            check += " (" + ", ".join(f"{n} {e:.2g}" for n, e in r["rel_l2"].items()) + ")"
        print(f"| {r['member']} | {r['shape']} | {f('kcv_fwd_ms')} | {f('fla_fwd_ms')} | {f('kcv_fwdbwd_ms')} | "
              f"{f('fla_fwdbwd_ms')} | {ratio} | {check} |" + (f" {r['error']}" if "error" in r else "")
              + (f" check: {r['check_error']}" if "check_error" in r else ""))


def run(args, shapes: list) -> tuple[list, str, dict, bool]:
    import triton

    gdn = import_gdn()
    impls = args.impls.split(",")
    # fla reads this on every call: its own Triton kernels, never FlashQLA behind its name.
    os.environ["FLA_FLASH_QLA"] = "0"
    bypassed = False
    if args.fla_gated_bwd_despite_guard:
        import fla.ops.common.chunk_o as chunk_o

        if not chunk_o.TRITON_ABOVE_3_7_1:
            chunk_o.TRITON_ABOVE_3_7_1 = bypassed = True
            print("note: fla's gated backward guard bypassed; its fwd+bwd times are speed references only "
                  "(known incorrect results with this Triton on Hopper)")
    device = torch.cuda.get_device_name()
    versions = {"torch": torch.__version__, "triton": triton.__version__}
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("fla-core", "flash-qla"):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:  # not installed: kcv's times alone, or no FlashQLA
            pass
    print(f"device: {device}, torch {torch.__version__}, triton {versions['triton']}, "
          f"fla-core {versions.get('fla-core', 'absent')}"
          + (f", flash-qla {versions['flash-qla']}" if "flash-qla" in versions else ""))
    rows = []
    for member in args.members.split(","):
        ours = kcv_function(member, gdn)
        theirs = fla_function(member) if "fla" in impls else None
        fused = flashqla_function(member) if "flashqla" in impls else None
        for index, (label, B, T, H, HV) in enumerate(shapes):
            inputs = make_inputs(member, B, T, H, HV)
            row = {"member": member, "shape": label}
            try:
                if index == 0 and "kcv" in impls and theirs is not None:
                    with torch.no_grad():
                        a, b = ours(*inputs).float(), theirs(*inputs).float()
                    row["max_diff_vs_fla"] = ((a - b).abs().max() / b.abs().max()).item()
                timed = (("kcv", ours), ("fla", theirs), ("flashqla", fused))
                for name, fn in [(n, f) for n, f in timed if n in impls and f is not None]:
                    row[f"{name}_fwd_ms"], row[f"{name}_fwd_p10_p90"] = time_ms(fn, inputs, False)
                    row[f"{name}_fwdbwd_ms"], row[f"{name}_fwdbwd_p10_p90"] = time_ms(fn, inputs, True)
                if args.profile and "kcv" in impls:
                    row["profile_fwd"] = kernel_profile(ours, inputs, False)
                    row["profile_fwdbwd"] = kernel_profile(ours, inputs, True)
            except Exception as e:  # a failed configuration is reported, the others still run
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            # kcv's check keys have no suffix, each baseline's its own (CHECK_KEYS).
            checked = [("", ours)] if "kcv" in impls and not args.no_check else []
            if args.check_baselines:
                checked += [(s, f) for s, f in zip(BASELINE_SUFFIXES, (theirs, fused)) if f is not None]
            if checked:
                row["check_window"] = window = max(1, min(T, args.check_tokens // (HV // H)))
            for suffix, fn in checked:
                try:
                    start = time.perf_counter()
                    row["rel_l2" + suffix] = errors = check_fwd_bwd(member, fn, inputs, window)
                    row["pass_fwd_bwd" + suffix] = within_bars(errors)
                    row["check_s" + suffix] = round(time.perf_counter() - start, 2)
                except Exception as e:
                    row["check_error" + suffix] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
            del inputs
            torch.cuda.empty_cache()
    return rows, device, versions, bypassed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="gdn,kda,gla,ssd")
    parser.add_argument("--shapes", default="all",
                        help="comma-separated shape indices (0-3 GDN.md's, 4 B1 T32768 H4) or 'all' (GDN.md's four)")
    parser.add_argument("--json", default=None, help="write the rows")
    parser.add_argument("--results", default=None, help="write one entry per member and shape timed by both")
    parser.add_argument("--impls", default="kcv,fla", help="which implementations to time")
    parser.add_argument("--fla-gated-bwd-despite-guard", action="store_true",
                        help="time fla's gated backward even where fla refuses it (Triton < 3.7.1 on Hopper "
                             "computes it incorrectly): a speed reference only, labelled as such for the "
                             "members whose fla function holds the guard (gdn, ssd)")
    parser.add_argument("--profile", action="store_true",
                        help="also record kcv's CUDA time per kernel (torch.profiler), forward and fwd+bwd")
    parser.add_argument("--no-check", action="store_true", help="skip the check against the float64 oracle")
    parser.add_argument("--check-baselines", action="store_true",
                        help="also check fla's and FlashQLA's outputs and gradients against the float64 oracle")
    parser.add_argument("--check-tokens", type=int, default=CHECK_TOKENS,
                        help="tokens times value heads the oracle checks per shape (its cost is linear in it)")
    parser.add_argument("--rows-from", default=None, help="rebuild the table and --results from this run log")
    parser.add_argument("--date", default=None, help="with --rows-from: the UTC date-time the logged run began")
    parser.add_argument("--versions", default=None,
                        help="with --rows-from, versions the log's device line lacks: 'triton 3.6.0, fla-core 0.6.0'")
    args = parser.parse_args(argv)
    try:
        shapes = select_shapes(args.shapes)
    except ValueError as e:
        parser.error(str(e))
    if args.rows_from:
        if not args.date:
            parser.error("--rows-from needs --date, the date-time of the logged run")
        rows, device, versions, bypassed = read_log(args.rows_from)
        if args.versions:
            versions = {**dict(part.split() for part in args.versions.split(",")), **versions}
        date = utc_iso(args.date)
        print(f"device: {device}, {len(rows)} rows from {args.rows_from}")
    else:
        date = datetime.now(timezone.utc).isoformat(timespec="seconds")
        rows, device, versions, bypassed = run(args, shapes)
    print_table(rows)
    print_profile(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.results:
        entries = merge_results(Path(args.results), results(rows, device, date, versions, bypassed))
        Path(args.results).write_text(json.dumps(entries, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
