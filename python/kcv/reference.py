"""The float64 reference of an opaque task, and its positive control.

The reference is the problem's ``Model`` with every floating parameter and buffer in float64,
run on float64 copies of the very values the candidate received (a float32 value widens to
float64 exactly), with every reduced-precision mode of PyTorch off. It refuses to run otherwise:
a reference that silently computes in float32 or TF32 would make a wrong candidate look right.

The control (GATES.md's envelope model) is the same ``Model`` in its declared precision (float32)
on the same device, also with reduced-precision modes off: the error a straightforward
implementation makes, against which the candidate's error is measured.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch


class ReferencePrecisionError(RuntimeError):
    """The reference would not compute in float64 without reduced-precision modes."""


def _matmul_precision() -> str:
    # Recent PyTorch refuses to report one precision once the legacy flags and the per-backend
    # API disagree; that state is not the strict one either.
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return "mixed"


def _flags() -> dict:
    return {
        "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "matmul.allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "matmul.allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "float32_matmul_precision": _matmul_precision(),
    }


STRICT_FLAGS = {
    "matmul.allow_tf32": False,
    "cudnn.allow_tf32": False,
    "matmul.allow_fp16_reduced_precision_reduction": False,
    "matmul.allow_bf16_reduced_precision_reduction": False,
    "float32_matmul_precision": "highest",
}


# PyTorch's own defaults (2.x), under which KernelBench's eval.py runs, since it sets none of
# them: cuDNN convolutions in TF32 on Ampere and later, matmuls not; reduced-precision reductions
# allowed for fp16 and bf16 matmuls.
PYTORCH_DEFAULT_FLAGS = {
    "matmul.allow_tf32": False,
    "cudnn.allow_tf32": True,
    "matmul.allow_fp16_reduced_precision_reduction": True,
    "matmul.allow_bf16_reduced_precision_reduction": True,
    "float32_matmul_precision": "highest",
}


def standard_check_flags(candidate_flags: dict) -> dict:
    """The flags KernelBench's check runs a candidate under: PyTorch's defaults, with whatever
    the candidate's module changed when it loaded (``candidate_flags`` were read after loading
    it under :data:`STRICT_FLAGS`)."""
    changed = {k: v for k, v in candidate_flags.items() if v != STRICT_FLAGS[k]}
    return {**PYTORCH_DEFAULT_FLAGS, **changed}


def precision_flags() -> dict:
    """PyTorch's global precision flags, by name."""
    return _flags()


def set_precision_flags(flags: dict) -> None:
    torch.backends.cuda.matmul.allow_tf32 = flags["matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flags[
        "matmul.allow_fp16_reduced_precision_reduction"
    ]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flags[
        "matmul.allow_bf16_reduced_precision_reduction"
    ]
    # PyTorch ties matmul.allow_tf32 to the matmul precision ("high" and "medium" allow TF32);
    # set last, the precision restores any state PyTorch itself reported.
    if flags["float32_matmul_precision"] != "mixed":
        torch.set_float32_matmul_precision(flags["float32_matmul_precision"])


def reduced_precision_modes() -> list[str]:
    """The reduced-precision modes that are on now; empty when PyTorch computes at full precision."""
    return [name for name, value in _flags().items() if value != STRICT_FLAGS[name]]


@contextlib.contextmanager
def strict_precision() -> Iterator[None]:
    """Every reduced-precision mode off for the duration; the previous flags come back after."""
    saved = _flags()
    set_precision_flags(STRICT_FLAGS)
    try:
        yield
    finally:
        set_precision_flags(saved)


def _floating_tensors(module: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Parameters, buffers, and tensors kept as plain attributes, of the module and below."""
    for name, p in module.named_parameters():
        yield name, p
    for name, b in module.named_buffers():
        yield name, b
    for prefix, sub in module.named_modules():
        for key, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                yield (f"{prefix}.{key}" if prefix else key), value


def check_float64(module: torch.nn.Module, args: list) -> None:
    """Raises ReferencePrecisionError naming a floating tensor that is not float64, or a mode."""
    modes = reduced_precision_modes()
    if modes:
        raise ReferencePrecisionError("the reference refuses to run with reduced-precision modes on: " + ", ".join(modes))
    for name, t in _floating_tensors(module):
        if t.is_floating_point() and t.dtype != torch.float64:
            raise ReferencePrecisionError(f"the reference refuses to run: {name} is {t.dtype}, not torch.float64")
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dtype != torch.float64:
            raise ReferencePrecisionError(f"the reference refuses to run: argument {i} is {a.dtype}, not torch.float64")


def widen(x: Any) -> Any:
    """float64 copies of floating tensors (exact for every narrower format); others unchanged."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.detach().to(torch.float64)
    return x


def as_float64(model: torch.nn.Module) -> torch.nn.Module:
    """The model with every floating parameter, buffer and tensor attribute in float64."""
    model = model.to(dtype=torch.float64)
    for _, sub in model.named_modules():
        for key, value in list(vars(sub).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and value.is_floating_point():
                setattr(sub, key, value.to(torch.float64))
    return model


def run_reference(model: torch.nn.Module, args: list) -> list[torch.Tensor]:
    """y* in float64. Refuses (ReferencePrecisionError) unless everything is float64 and strict."""
    from .task import as_outputs

    with strict_precision():
        check_float64(model, args)
        with torch.no_grad():
            outs = as_outputs(model(*args))
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise TypeError(f"the reference returned {type(o).__name__} as output {i}, not a tensor")
        if o.is_floating_point() and o.dtype != torch.float64:
            raise ReferencePrecisionError(
                f"the reference refuses its own output {i}: {o.dtype}, so part of it was computed below float64"
            )
    return outs


def run_control(model: torch.nn.Module, args: list) -> list[torch.Tensor]:
    """The positive control: the model in its declared precision, reduced-precision modes off."""
    from .task import as_outputs

    with strict_precision(), torch.no_grad():
        return as_outputs(model(*args))
