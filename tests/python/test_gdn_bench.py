"""bench/gdn_bench.py without a GPU: the oracle check of one shape on kcv's CPU ops (an exact
answer passes, a perturbed one fails, tensor by tensor), the relative-L2 bars, and --rows-from
on a small log."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
gdn = pytest.importorskip("kcv.gdn")
core = pytest.importorskip("kcv._core")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gdn_bench.py"
spec = importlib.util.spec_from_file_location("gdn_bench", BENCH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

oracle = pytest.mark.skipif(not hasattr(core, "gdn_oracle_forward"),
                            reason="kcv._core has no recurrence oracle bindings")

# B 2 so the slice must pick batch 0, HV = 2 H so head 0's gradients must sum over its value
# heads, a window shorter than T so the gradients after it must be zero.
B, T, H, HV, WINDOW = 2, 40, 2, 4, 24


def gradient_scaled(x, factor):
    """x in the forward; its gradient times factor in the backward."""
    return x + (factor - 1) * (x - x.detach())


def gradient_leak(x, window):
    """x, with a gradient after the window, where the exact one is zero, as large as the window's."""
    x = x * 1
    x.register_hook(lambda d: torch.cat([d[:, :window], d[:, window:] + d[:, :window].abs().mean()], dim=1))
    return x


def test_rel_l2_and_bars():
    ref = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert bench.rel_l2(ref, ref) == 0
    assert bench.rel_l2(torch.tensor([3.0, 4.05], dtype=torch.float64), ref.numpy()) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="all zero"):
        bench.rel_l2(ref, torch.zeros(2))
    assert bench.within_bars({"o": 0.005, "dq": 0.008, "dg": 0.02})
    assert not bench.within_bars({"o": 0.0051, "dq": 0.0})
    assert not bench.within_bars({"o": 0.0, "dbeta": 0.0201})
    assert not bench.within_bars({"o": math.nan})


@oracle
@pytest.mark.parametrize("member", ["gdn", "kda", "gla", "ssd", "la"])
def test_check_passes_the_exact_op_and_fails_each_perturbed_tensor(member):
    inputs = bench.make_inputs(member, B, T, H, HV, seed=2, device="cpu")
    ours = bench.kcv_function(member, gdn)
    errors = bench.check_fwd_bwd(member, ours, inputs, WINDOW)
    want = {"o", "dq", "dk", "dv"} | ({"dg"} if member != "la" else set()) | ({"dbeta"} if member in ("gdn", "kda") else set())
    assert set(errors) == want
    # The CPU op is exact up to its bf16 outputs (relative rounding 2^-9).
    assert bench.within_bars(errors) and max(errors.values()) < 3e-3, errors
    index = {"dq": 0, "dk": 1, "dv": 2, "dg": 3, "dbeta": 4}
    for name in sorted(want - {"o"}):
        def scaled(*x, i=index[name]):
            return ours(*[gradient_scaled(t, 1.03) if j == i else t for j, t in enumerate(x)])

        bad = bench.check_fwd_bwd(member, scaled, inputs, WINDOW)
        assert not bench.within_bars(bad) and bad[name] > bench.BARS[name], (name, bad)
        assert all(bad[n] == errors[n] for n in bad if n != name), (name, bad)
    bad = bench.check_fwd_bwd(member, lambda *x: ours(*x) * 1.01, inputs, WINDOW)
    assert bad["o"] > bench.BARS["o"] and not bench.within_bars(bad)
    leak = bench.check_fwd_bwd(member, lambda q, k, *x: ours(q, gradient_leak(k, WINDOW), *x), inputs, WINDOW)
    assert leak["dk"] > bench.BARS["dk"], leak


@oracle
def test_check_sees_a_value_head_mixed_up_with_another_group():
    """Value head 1 fed from q/k head 1 (j % H instead of j // r) fails although head 0 is right."""
    inputs = bench.make_inputs("gdn", B, T, H, HV, seed=3, device="cpu")
    ours = bench.kcv_function("gdn", gdn)

    def mixed(q, k, v, g, b):
        order = torch.tensor([0, 2, 1, 3])  # value heads (0, 1 | 2, 3) -> (0, 2 | 1, 3)
        o = ours(q, k, v[:, :, order], g[:, :, order], b[:, :, order])
        return o[:, :, order]

    bad = bench.check_fwd_bwd("gdn", mixed, inputs, WINDOW)
    assert bad["o"] > bench.BARS["o"] and bad["dq"] > bench.BARS["dq"], bad


LOG = """note: fla's gated backward guard bypassed; its fwd+bwd times are speed references only (known incorrect results)
device: NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0, fla-core 0.6.0
{"member": "gdn", "shape": "B4 T4096 H32", "kcv_fwd_ms": 20.0, "kcv_fwdbwd_ms": 80.0, "fla_fwd_ms": 1.0, "fla_fwdbwd_ms": 4.0, "check_window": 4096, "rel_l2": {"o": 0.002, "dq": 0.004}, "pass_fwd_bwd": true}
{"member": "gdn", "shape": "B1 T8192 H96", "kcv_fwd_ms": 2.0, "kcv_fwdbwd_ms": 5.0, "fla_fwd_ms": 3.0, "fla_fwdbwd_ms": 10.0, "check_error": "RuntimeError: no oracle"}
{"member": "kda", "shape": "B4 T4096 H32", "kcv_fwd_ms": 20.0, "error": "OutOfMemoryError: ..."}
{"member": "kda", "shape": "B1 T8192 H96", "kcv_fwd_ms": 20.0, "kcv_fwdb
"""


def test_rows_from_log(tmp_path, capsys):
    log, out = tmp_path / "gdn_bench.log", tmp_path / "results.json"
    log.write_text(LOG)
    assert bench.main(["--rows-from", str(log), "--date", "2026-11-30T17:45Z", "--results", str(out)]) == 0
    assert "| gdn | B1 T8192 H96 | 2.000 | 3.000 | 5.000 | 10.000 | 2 |" in capsys.readouterr().out
    first, second = json.loads(out.read_text())  # the kda rows have no fwd+bwd pair
    assert first["baseline"] == ("fla-core 0.6.0 fla.ops.gated_delta_rule.chunk_gated_delta_rule, Triton 3.6.0; "
                                 "gated backward guard bypassed, speed reference only")
    timed = (first["baseline_ms"], first["kcv_ms"], first["ratio"], first["fwd"]["ratio"])
    assert timed == (4.0, 80.0, 0.05, 0.05)
    assert first["pass_fwd_bwd"] is True and first["rel_l2"] == {"o": 0.002, "dq": 0.004}
    assert (first["device"], first["date"]) == ("NVIDIA H200", "2026-11-30T17:45:00+00:00")
    assert second["ratio"] == 2 and second["pass_fwd_bwd"] is None
    assert second["check_error"] == "RuntimeError: no oracle"


def test_rows_from_a_log_of_several_runs_label_each_baseline_by_its_own_run(tmp_path):
    # One process without the guard bypass (ssd), then one with it (ssd, and gla, whose fla function
    # never reaches the guard): the note precedes the device line of the process that printed it.
    row = {"kcv_fwd_ms": 2.0, "kcv_fwdbwd_ms": 8.0, "fla_fwd_ms": 1.0, "fla_fwdbwd_ms": 2.0}
    device = "device: NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0, fla-core 0.6.0"
    log, out = tmp_path / "gdn_bench.log", tmp_path / "results.json"
    log.write_text("\n".join([device, json.dumps({"member": "ssd", "shape": "B4 T4096 H32", **row}),
                              LOG.splitlines()[0], device,
                              json.dumps({"member": "ssd", "shape": "B1 T8192 H96", **row}),
                              json.dumps({"member": "gla", "shape": "B4 T4096 H32", **row})]) + "\n")
    bench.main(["--rows-from", str(log), "--date", "2026-12-04T10:54Z", "--results", str(out)])
    plain, bypassed, gla = json.loads(out.read_text())
    assert plain["baseline"] == "fla-core 0.6.0 fla.ops.simple_gla.chunk_simple_gla, Triton 3.6.0"
    assert bypassed["baseline"].endswith("; gated backward guard bypassed, speed reference only")
    assert gla["baseline"] == "fla-core 0.6.0 fla.ops.gla.chunk_gla, Triton 3.6.0"


def test_results_update_an_existing_file_and_keep_its_other_entries(tmp_path):
    log, out = tmp_path / "gdn_bench.log", tmp_path / "results.json"
    log.write_text(LOG)
    older = [{"member": "gdn", "shape": "B4 T4096 H32", "kcv_ms": 99.0, "date": "old"},
             {"member": "ssd", "shape": "B4 T4096 H32", "kcv_ms": 7.0, "date": "old"}]
    out.write_text(json.dumps(older))
    bench.main(["--rows-from", str(log), "--date", "2026-11-30T17:45Z", "--results", str(out)])
    entries = json.loads(out.read_text())
    assert [(e["member"], e["shape"]) for e in entries] == [
        ("gdn", "B4 T4096 H32"), ("ssd", "B4 T4096 H32"), ("gdn", "B1 T8192 H96")]
    assert entries[0]["kcv_ms"] == 80.0 and entries[1] == older[1]
    out.write_text("[{\"member\": \"gdn\"")   # a file cut short is refused and left as it was
    with pytest.raises(SystemExit, match="not a JSON results file"):
        bench.main(["--rows-from", str(log), "--date", "2026-11-30T17:45Z", "--results", str(out)])
    assert out.read_text() == "[{\"member\": \"gdn\""


def test_rows_from_an_older_log_says_what_it_lacks(tmp_path):
    log, out = tmp_path / "gdn_bench.log", tmp_path / "results.json"
    log.write_text("device: NVIDIA H200, torch 2.11.0+cu130\n" + LOG.splitlines()[3].replace("gdn", "gla") + "\n")
    bench.main(["--rows-from", str(log), "--date", "2026-11-30T19:45+02:00", "--results", str(out)])
    (entry,) = json.loads(out.read_text())
    assert "version not in log" in entry["baseline"] and "bypassed" not in entry["baseline"]
    assert entry["date"] == "2026-11-30T17:45:00+00:00"
    bench.main(["--rows-from", str(log), "--date", "2026-11-30T17:45Z", "--results", str(out),
                "--versions", "triton 3.6.0, fla-core 0.6.0"])
    assert json.loads(out.read_text())[0]["baseline"].startswith("fla-core 0.6.0 fla.ops.gla.chunk_gla, Triton 3.6.0")
    with pytest.raises(SystemExit):
        bench.main(["--rows-from", str(log)])


def test_flashqla_and_the_baselines_checks_reach_the_results(tmp_path):
    log, out = tmp_path / "gdn_bench.log", tmp_path / "results.json"
    row = {"member": "gdn", "shape": "B4 T4096 H32", "kcv_fwd_ms": 2.0, "kcv_fwdbwd_ms": 8.0, "fla_fwd_ms": 1.0,
           "fla_fwdbwd_ms": 4.0, "flashqla_fwd_ms": 0.5, "flashqla_fwdbwd_ms": 2.0, "rel_l2_fla": {"o": 0.1},
           "pass_fwd_bwd_fla": False, "rel_l2_flashqla": {"o": 0.002}, "pass_fwd_bwd_flashqla": True}
    log.write_text("device: NVIDIA H200, torch 2.11.0+cu130, triton 3.6.0, fla-core 0.6.0, flash-qla 0.1.3\n"
                   + json.dumps(row) + "\n")
    bench.main(["--rows-from", str(log), "--date", "2026-12-01T18:00Z", "--results", str(out)])
    (entry,) = json.loads(out.read_text())
    assert (entry["ratio"], entry["fwd"]["ratio"]) == (0.5, 0.5)
    assert entry["flashqla"] == {"fwdbwd_ms": 2.0, "ratio": 0.25, "fwd_ms": 0.5, "fwd_ratio": 0.25}
    assert entry["pass_fwd_bwd_fla"] is False and entry["rel_l2_flashqla"] == {"o": 0.002}
    assert entry["baseline"].startswith("fla-core 0.6.0 fla.ops.gated_delta_rule")


def test_kernel_name_keeps_the_function_only():
    key = ("void kcv::gdn::cuda::state_scan_tc<1, true, __nv_bfloat16>(kcv::gdn::cuda::Dims, "
           "kcv::gdn::cuda::Workspace, kcv::gdn::cuda::ForwardArgs)")
    assert bench.kernel_name(key) == "state_scan_tc"
    nested = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
              "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
    assert bench.kernel_name(nested) == "vectorized_elementwise_kernel"
    assert bench.kernel_name("Memset (Device)") == "Memset"


def test_shapes_by_index_and_a_bad_index_named():
    assert bench.select_shapes("all") == bench.SHAPES
    assert bench.select_shapes("3,4") == [bench.SHAPES[3], bench.FEW_HEADS]
    for bad in ("5", "x", "1,", "-1"):
        with pytest.raises(ValueError, match="neither a shape index"):
            bench.select_shapes(bad)
    with pytest.raises(SystemExit):
        bench.main(["--shapes", "9"])
