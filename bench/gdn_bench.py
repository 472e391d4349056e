"""Times the kcv.gdn CUDA kernels against flash-linear-attention's Triton kernels (fla-core) at
GDN.md's shapes, K = V = 128, bf16: forward, and forward + backward, for each member both
implement. Timing: triton.testing.do_bench, median, warm-up discarded, gradients cleared between
repetitions; one process, one GPU, both implementations on the same inputs. Also reports the
largest difference between the two implementations' outputs at the first shape, relative to the
largest output, as a cross-check.

    python bench/gdn_bench.py [--members gdn,kda,gla,ssd] [--json out.json]

Needs a CUDA device, libkcv_gdn_cuda.so (KCV_GDN_CUDA_LIB or a build tree) and fla-core.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

SHAPES = [  # (label, B, T, H, HV)
    ("B4 T4096 H32", 4, 4096, 32, 32),
    ("B1 T8192 H96", 1, 8192, 96, 96),
    ("B2 T16384 H16", 2, 16384, 16, 16),
    ("B1 T32768 H16/HV32", 1, 32768, 16, 32),
]
K = V = 128


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


def make_inputs(member: str, B: int, T: int, H: int, HV: int, seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *s: torch.randn(*s, generator=gen, device="cuda")  # noqa: E731
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


def implementations(member: str, gdn):
    """(ours, fla's) as functions of (q, k, v, g, beta) returning o."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    from fla.ops.gla import chunk_gla
    from fla.ops.kda import chunk_kda
    from fla.ops.simple_gla import chunk_simple_gla

    def repeat(q, k, v):
        r = v.shape[2] // q.shape[2]
        return (q.repeat_interleave(r, dim=2), k.repeat_interleave(r, dim=2)) if r > 1 else (q, k)

    ours = {
        "gdn": lambda q, k, v, g, b: gdn.chunk_gated_delta_rule(q, k, v, g, b)[0],
        "kda": lambda q, k, v, g, b: gdn.chunk_kda(q, k, v, g, b)[0],
        "gla": lambda q, k, v, g, b: gdn.chunk_gla(q, k, v, g)[0],
        "ssd": lambda q, k, v, g, b: gdn.chunk_simple_gla(q, k, v, g)[0],
    }[member]
    theirs = {
        "gdn": lambda q, k, v, g, b: chunk_gated_delta_rule(q, k, v, g, b, scale=K ** -0.5)[0],
        "kda": lambda q, k, v, g, b: chunk_kda(q, k, v, g, b, scale=K ** -0.5)[0],
        "gla": lambda q, k, v, g, b: chunk_gla(*repeat(q, k, v), v, g, scale=K ** -0.5)[0],
        "ssd": lambda q, k, v, g, b: chunk_simple_gla(*repeat(q, k, v), v, g, scale=K ** -0.5)[0],
    }[member]
    return ours, theirs


def time_ms(fn, inputs, backward: bool) -> float:
    import triton

    if not backward:
        with torch.no_grad():
            return triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=100, return_mode="median")
    leaves = [x.detach().requires_grad_(True) if x is not None else None for x in inputs]
    do = torch.randn_like(fn(*inputs))

    def step():
        fn(*leaves).backward(do)

    return triton.testing.do_bench(step, warmup=25, rep=100, return_mode="median",
                                   grad_to_none=[x for x in leaves if x is not None])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="gdn,kda,gla,ssd")
    parser.add_argument("--shapes", default="all", help="comma-separated shape indices or 'all'")
    parser.add_argument("--json", default=None)
    parser.add_argument("--impls", default="kcv,fla", help="which implementations to time")
    parser.add_argument("--fla-gated-bwd-despite-guard", action="store_true",
                        help="time fla's gated backward even where fla refuses it (Triton < 3.7.1 on Hopper "
                             "computes it incorrectly): a speed reference only, labelled as such")
    args = parser.parse_args()
    gdn = import_gdn()
    impls = args.impls.split(",")
    if args.fla_gated_bwd_despite_guard:
        import fla.ops.common.chunk_o as chunk_o

        if not chunk_o.TRITON_ABOVE_3_7_1:
            chunk_o.TRITON_ABOVE_3_7_1 = True
            print("note: fla's gated backward guard bypassed; its fwd+bwd times are speed references only "
                  "(known incorrect results with this Triton on Hopper)")
    shapes = SHAPES if args.shapes == "all" else [SHAPES[int(i)] for i in args.shapes.split(",")]
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for member in args.members.split(","):
        ours, theirs = implementations(member, gdn)
        for index, (label, B, T, H, HV) in enumerate(shapes):
            inputs = make_inputs(member, B, T, H, HV)
            row = {"member": member, "shape": label}
            try:
                if index == 0 and len(impls) == 2:
                    with torch.no_grad():
                        a, b = ours(*inputs).float(), theirs(*inputs).float()
                    row["max_diff_vs_fla"] = ((a - b).abs().max() / b.abs().max()).item()
                for name, fn in [(n, f) for n, f in (("kcv", ours), ("fla", theirs)) if n in impls]:
                    row[f"{name}_fwd_ms"] = time_ms(fn, inputs, False)
                    row[f"{name}_fwdbwd_ms"] = time_ms(fn, inputs, True)
            except Exception as e:  # a failed configuration is reported, the others still run
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            rows.append(row)
            print(json.dumps(row), flush=True)
            del inputs
            torch.cuda.empty_cache()
    print("\n| member | shape | kcv fwd ms | fla fwd ms | kcv fwd+bwd ms | fla fwd+bwd ms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        f = lambda key: f"{r[key]:.3f}" if key in r else "—"  # noqa: E731
        print(f"| {r['member']} | {r['shape']} | {f('kcv_fwd_ms')} | {f('fla_fwd_ms')} | {f('kcv_fwdbwd_ms')} | "
              f"{f('fla_fwdbwd_ms')} |" + (f" {r['error']}" if "error" in r else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
