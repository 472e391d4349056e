"""What the probe budget buys: one candidate's battery judged at several budgets, side by side
with the standard check (which always runs at the problem's own sizes).

    python3 bench/probe_budget.py                                  # a ReLU over 16 x 262,144 floats
    python3 bench/probe_budget.py --reference P.py --candidate K.py --device cuda --budgets 64 16 4 1

Without --reference the problem is the test suite's ReLU with its size constants overridden
(--batch, --dim), and the candidate the test suite's correct ReLU. Budgets are in MiB. Prints one
Markdown row per budget: the sizes the gates probed at, the battery's seconds (reference and
gates, the candidate's load and the standard check excluded), the standard check's seconds,
their ratio, and the verdicts.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import kcv

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "python" / "data"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", help="a KernelBench problem (default: a ReLU written from the tests' one)")
    ap.add_argument("--candidate", help="a candidate defining ModelNew (default: the tests' correct ReLU)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--dim", type=int, default=262144)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--budgets", type=float, nargs="+", default=[64, 4])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    reference = args.reference
    if reference is None:
        source = (DATA / "problems" / "relu.py").read_text()
        source = re.sub(r"(?m)^batch_size = .*$", f"batch_size = {args.batch}", source)
        source = re.sub(r"(?m)^dim = .*$", f"dim = {args.dim}", source)
        reference = str(Path(tempfile.mkdtemp(prefix="kcv-bench-")) / "relu_problem.py")
        Path(reference).write_text(source)
    candidate = args.candidate or str(DATA / "candidates" / "relu_correct_torch.py")

    print("| budget MiB | gates probe at | battery s | standard check s | ratio | failed gates |")
    print("|---|---|---|---|---|---|")
    for mib in args.budgets:
        r = kcv.verify(reference, candidate, device=args.device, seed=args.seed,
                       settings={"probe_budget_bytes": int(mib * (1 << 20))})
        if r.get("error"):
            print(f"| {mib:g} | {r['error']} | | | | |")
            continue
        dims = ", ".join(f"{d['name']} = {d['nominal']}" for d in r["task"]["contract"]["dims"])
        t = r.timing
        battery = t["total_s"] - t.get("startup_s", 0) - t.get("load_s", 0) - t.get("standard_check_s", 0)
        standard = t.get("standard_check_s", 0.0)
        ratio = battery / standard if standard > 0 else float("nan")
        failed = " ".join(r.failed) or "none"
        print(f"| {mib:g} | {dims} | {battery:.2f} | {standard:.2f} | {ratio:.1f} | {failed} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
