"""The source lines where a kernel's warps wait: Nsight Compute's warp-state samples (the
SourceCounters section, per instruction address) summed per source line of a report, with each
line's largest stall reasons. The kernels must be built with line information (-lineinfo).

    python3 bench/ncu_lines.py REPORT.ncu-rep [--top 30]

The module ncu_report comes from Nsight Compute's extras/python (found beside `ncu` or under
/opt/nvidia). One block per profiled kernel: total samples, then the lines with the most.
"""
import argparse
import collections
import glob
import os
import shutil
import sys

PREFIX = "smsp__pcsamp_warps_issue_stalled_"


def import_ncu_report():
    """Nsight Compute's module, from the path, beside `ncu`, or from an installation under /opt."""
    ncu = shutil.which("ncu")
    places = [os.path.join(os.path.dirname(os.path.realpath(ncu)), "extras", "python")] if ncu else []
    places += sorted(glob.glob("/opt/nvidia/nsight-compute/*/extras/python"), reverse=True)
    places += sorted(glob.glob("/usr/local/cuda*/nsight-compute*/extras/python"), reverse=True)
    for place in [None] + places:
        if place:
            sys.path.insert(0, place)
        try:
            import ncu_report
            return ncu_report
        except ImportError:
            if place:
                sys.path.remove(place)
    sys.exit(f"ncu_lines: no ncu_report module on the path nor in {places}")


def per_line(action):
    """{(file, line): Counter(reason -> samples)} over every sampled address of the action."""
    lines = collections.defaultdict(collections.Counter)
    names = [n for n in action.metric_names() if n.startswith(PREFIX) and not n.endswith("_not_issued")]
    for name in names:
        metric = action.metric_by_name(name)
        if not metric.has_correlation_ids():
            continue
        pcs = metric.correlation_ids()
        for i in range(metric.num_instances()):
            samples = metric.as_uint64(i)
            if not samples:
                continue
            info = action.source_info(pcs.as_uint64(i))
            where = (os.path.basename(info.file_name()), info.line()) if info else ("?", 0)
            lines[where][name[len(PREFIX):]] += samples
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    ncu_report = import_ncu_report()
    ctx = ncu_report.load_report(args.report)
    for r in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(r)
        for a in range(rng.num_actions()):
            action = rng.action_by_idx(a)
            lines = per_line(action)
            total = sum(sum(c.values()) for c in lines.values())
            print(f"== {action.name()}: {total} warp samples, {len(lines)} source lines")
            if not total:
                found = [n for n in action.metric_names() if "pcsamp" in n]
                print(f"   no per-address samples; pcsamp metrics in the report: {found[:20]}")
                continue
            reasons = collections.Counter()
            for c in lines.values():
                reasons.update(c)
            print("   reasons: " + ", ".join(f"{k} {v / total:.0%}" for k, v in reasons.most_common(6)))
            ranked = sorted(lines.items(), key=lambda kv: -sum(kv[1].values()))
            for (f, ln), c in ranked[: args.top]:
                n = sum(c.values())
                why = ", ".join(f"{k} {v / n:.0%}" for k, v in c.most_common(3))
                print(f"   {n / total:6.1%}  {f}:{ln}  [{why}]")


if __name__ == "__main__":
    main()
