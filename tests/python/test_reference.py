"""The float64 reference runner and its refusals."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kcv.reference import (  # noqa: E402
    STRICT_FLAGS,
    ReferencePrecisionError,
    as_float64,
    check_float64,
    precision_flags,
    reduced_precision_modes,
    run_control,
    run_reference,
    set_precision_flags,
    strict_precision,
)

pytestmark = pytest.mark.usefixtures("strict_flags")


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.offset = torch.tensor([0.5, -0.25])   # a plain tensor attribute, not a buffer

    def forward(self, x):
        return self.lin(x) + self.offset


def small_integer_model() -> Linear:
    m = Linear()
    with torch.no_grad():
        m.lin.weight.copy_(torch.tensor([[1.0, 2.0, 3.0], [-4.0, 5.0, -6.0]]))
        m.lin.bias.copy_(torch.tensor([7.0, -8.0]))
    return m


def test_strict_precision_sets_every_flag_and_restores():
    loose = {**STRICT_FLAGS, "matmul.allow_tf32": True, "cudnn.allow_tf32": True, "float32_matmul_precision": "high",
             "matmul.allow_bf16_reduced_precision_reduction": True}
    set_precision_flags(loose)
    assert set(reduced_precision_modes()) == {"matmul.allow_tf32", "cudnn.allow_tf32", "float32_matmul_precision",
                                              "matmul.allow_bf16_reduced_precision_reduction"}
    with strict_precision():
        assert reduced_precision_modes() == []
    assert precision_flags() == loose


def test_reference_is_exact_on_small_integers():
    m = as_float64(small_integer_model())
    x = torch.tensor([[1.0, 1.0, 1.0], [2.0, -1.0, 0.5]], dtype=torch.float64)
    (y,) = run_reference(m, [x])
    assert y.dtype == torch.float64
    assert y.tolist() == [[13.5, -13.25], [9.0, -24.25]]


def test_reference_refuses_float32_parameters_arguments_and_attributes():
    m = small_integer_model()
    with pytest.raises(ReferencePrecisionError, match="lin.weight is torch.float32"):
        run_reference(m, [torch.ones(1, 3, dtype=torch.float64)])
    m64 = as_float64(small_integer_model())
    with pytest.raises(ReferencePrecisionError, match="argument 0 is torch.float32"):
        run_reference(m64, [torch.ones(1, 3)])
    m64.offset = torch.tensor([0.5, -0.25])
    with pytest.raises(ReferencePrecisionError, match="offset is torch.float32"):
        run_reference(m64, [torch.ones(1, 3, dtype=torch.float64)])


def test_reference_refuses_with_a_reduced_precision_mode_on():
    set_precision_flags({**STRICT_FLAGS, "matmul.allow_tf32": True, "float32_matmul_precision": "high"})
    with pytest.raises(ReferencePrecisionError, match="matmul.allow_tf32"):
        check_float64(as_float64(small_integer_model()), [])


def test_reference_refuses_a_model_that_computes_below_float64():
    class Downcast(torch.nn.Module):
        def forward(self, x):
            return x.float() * 2

    with pytest.raises(ReferencePrecisionError, match="torch.float32"):
        run_reference(Downcast(), [torch.ones(2, dtype=torch.float64)])


def test_integer_arguments_are_allowed():
    class Gather(torch.nn.Module):
        def forward(self, x, idx):
            return x[idx]

    (y,) = run_reference(Gather(), [torch.arange(4, dtype=torch.float64), torch.tensor([3, 0])])
    assert y.tolist() == [3.0, 0.0]


def test_control_runs_in_float32_with_modes_off():
    seen = {}

    class Spy(torch.nn.Module):
        def forward(self, x):
            seen["modes"] = reduced_precision_modes()
            return x * 3

    set_precision_flags({**STRICT_FLAGS, "float32_matmul_precision": "medium", "matmul.allow_tf32": True})
    (y,) = run_control(Spy(), [torch.ones(2)])
    assert y.dtype == torch.float32 and seen["modes"] == []
    assert precision_flags()["float32_matmul_precision"] == "medium"


def test_pytorch_default_flags_are_a_fresh_interpreters():
    # The standard check reproduces KernelBench's environment, which is PyTorch's untouched one.
    import json
    import subprocess
    import sys

    from kcv.reference import PYTORCH_DEFAULT_FLAGS

    fresh = subprocess.run([sys.executable, "-c", "import json; from kcv.reference import precision_flags; "
                            "print(json.dumps(precision_flags()))"], capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    assert json.loads(fresh.stdout) == PYTORCH_DEFAULT_FLAGS


def test_standard_check_flags_keep_what_the_candidate_changed():
    from kcv.reference import PYTORCH_DEFAULT_FLAGS, STRICT_FLAGS, standard_check_flags

    assert standard_check_flags(dict(STRICT_FLAGS)) == PYTORCH_DEFAULT_FLAGS
    changed = {**STRICT_FLAGS, "matmul.allow_tf32": True, "float32_matmul_precision": "high"}
    assert standard_check_flags(changed) == {**PYTORCH_DEFAULT_FLAGS, "matmul.allow_tf32": True,
                                             "float32_matmul_precision": "high"}
