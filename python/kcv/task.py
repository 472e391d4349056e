"""The contract of an opaque task, derived from a KernelBench problem module.

kcv judges a KernelBench candidate against a contract like any other, with the envelope error
model of GATES.md (the task is opaque: no accumulation length is known) and an external oracle,
``external:kernelbench``: the problem's ``Model`` run in float64 by :mod:`kcv.reference`. This
module writes that contract from the problem itself:

- inputs: the tensors ``get_inputs()`` returns, with their dtypes and shapes (other values are
  passed through unchanged and are not contract inputs); outputs: what ``Model`` returns;
- dimensions: the module-level integer constants that size an input. Each constant is perturbed
  and the problem re-run on PyTorch's ``meta`` device (shapes only, no memory), so a shape entry
  is named after a constant only when changing that constant changes exactly that entry; sizes
  derived otherwise (``2 * dim``) stay literal and are not swept by CMP-01.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from . import _core
from .kernelbench import Problem, load_problem, size_constants

ORACLE = "external:kernelbench"
CONTROL = "model_fp32"

_TORCH_TO_KCV = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "bool",
}
for _name, _code in (("float8_e4m3fn", "e4m3"), ("float8_e5m2", "e5m2")):
    if hasattr(torch, _name):
        _TORCH_TO_KCV[getattr(torch, _name)] = _code


def kcv_dtype(dtype: torch.dtype) -> str:
    try:
        return _TORCH_TO_KCV[dtype]
    except KeyError:
        raise TypeError(f"kcv has no dtype for {dtype}") from None


def as_outputs(value: Any) -> list:
    """A model's return value as a list (a tensor, or a tuple or list of them)."""
    if isinstance(value, (tuple, list)):
        return list(value)
    return [value]


@dataclass
class Shapes:
    inputs: list[tuple[int, ...]]             # per tensor input
    input_dtypes: list[torch.dtype]
    positions: list[int]                      # index of each tensor input in get_inputs()
    count: int                                # len(get_inputs()), tensors or not
    outputs: list[tuple[int, ...]] | None     # None when the model cannot run on meta
    output_dtypes: list[torch.dtype] | None


def meta_shapes(problem: Problem) -> Shapes:
    """Shapes of the inputs and outputs without memory: everything on PyTorch's meta device."""
    with torch.device("meta"), torch.no_grad():
        values = problem.get_inputs()
        positions = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
        tensors = [values[i] for i in positions]
        shapes = Shapes([tuple(t.shape) for t in tensors], [t.dtype for t in tensors], positions, len(values), None, None)
        try:
            model = problem.Model(*problem.get_init_inputs())
            outs = as_outputs(model(*values))
            if all(isinstance(o, torch.Tensor) for o in outs):
                shapes.outputs = [tuple(o.shape) for o in outs]
                shapes.output_dtypes = [o.dtype for o in outs]
        except Exception:
            pass
    return shapes


def real_output_shapes(problem: Problem, device: torch.device) -> tuple[list[tuple[int, ...]], list[torch.dtype]]:
    """Output shapes from a real fp32 run, for models some operator of which has no meta kernel."""
    with torch.no_grad():
        torch.manual_seed(0)
        values = [v.to(device) if isinstance(v, torch.Tensor) else v for v in problem.get_inputs()]
        init = [v.to(device) if isinstance(v, torch.Tensor) else v for v in problem.get_init_inputs()]
        model = problem.Model(*init).to(device)
        outs = as_outputs(model(*values))
    if not all(isinstance(o, torch.Tensor) for o in outs):
        raise TypeError("the model returns something other than tensors")
    return [tuple(o.shape) for o in outs], [o.dtype for o in outs]


@dataclass
class Task:
    """An opaque task: its contract and how its inputs map onto get_inputs()."""

    contract: "_core.Contract"
    document: dict
    source: str
    path: str
    nominal: dict[str, int]                   # every size constant of the module
    free: list[str]                           # constants declared as free dimensions
    positions: list[int]                      # get_inputs() index of each contract input
    input_names: list[str]
    output_names: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def json(self) -> str:
        return json.dumps(self.document)


def _identifier(name: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) is not None


def _input_names(problem: Problem, positions: list[int], count: int) -> list[str]:
    """forward()'s parameter names where they name the arguments one to one, else input<i>."""
    try:
        params = [p for p in inspect.signature(problem.Model.forward).parameters.values() if p.name != "self"]
    except (TypeError, ValueError):
        params = []
    plain = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(plain) == count:
        names = [plain[i].name for i in positions]
        if all(_identifier(n) and not n.startswith("output") for n in names) and len(set(names)) == len(names):
            return names
    return [f"input{i}" for i in positions]


def _contract_id(path: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".py"))
    return "kernelbench." + (stem.lstrip(".") or "task")


# Bytes of one call's inputs and outputs above which the gates probe at smaller sizes. KernelBench
# sizes its problems for timing (a ReLU over 4096 x 393,216 floats). A battery makes about a
# hundred calls, each compared element by element against a float64 reference on the host; on an
# H200 a call over 64 MiB cost about 3 s, so one kernel's battery took over five minutes. Halving
# the largest free size until a call fits keeps every gate's question (a quarter of a million
# floats still span a thousand thread blocks); the standard check still runs at the problem's own
# sizes. bench/probe_budget.py measures the trade.
PROBE_BUDGET_BYTES = 1 << 20
PROBE_MIN_SIZE = 8


def memory_cap_bytes(settings: dict) -> int:
    """The largest call CMP-01 makes: 16 probe budgets, unless the settings say otherwise. The sweep
    is about shapes, not about memory."""
    return int(settings.get("memory_cap_bytes", 16 * int(settings.get("probe_budget_bytes", PROBE_BUDGET_BYTES))))


def _call_bytes(shapes: list, dtypes: list[torch.dtype], dims: dict[str, int]) -> int:
    total = 0
    for shape, dtype in zip(shapes, dtypes):
        n = 1
        for e in shape:
            n *= dims[e] if isinstance(e, str) else e
        total += n * torch.empty((), dtype=dtype).element_size()
    return total


def _scaled_dims(shapes: list, dtypes: list[torch.dtype], dims: dict[str, int], budget: int,
                 shapes_at: Callable[[dict[str, int]], list | None]) -> tuple[dict[str, int], list]:
    """The free sizes with the largest halved (rounded up) until a call fits the budget, and the
    call's shapes there. No size goes below 8 (or its own value): a batch or a channel count of one
    would be a different problem, and the budget is a goal, not a limit. ``shapes_at`` gives the
    call's shapes at trial sizes, numbers in the outputs following them, or None where the problem
    no longer builds with the contract's named sizes (a pooling window longer than the sequence):
    that halving is not made, and the size keeps its value."""
    floor = {n: min(v, PROBE_MIN_SIZE) for n, v in dims.items()}
    dims = dict(dims)
    kept: set[str] = set()
    while _call_bytes(shapes, dtypes, dims) > budget:
        largest = max((n for n in dims if dims[n] > floor[n] and n not in kept), key=lambda n: dims[n], default=None)
        if largest is None:
            break
        trial = {**dims, largest: max(floor[largest], (dims[largest] + 1) // 2)}
        got = shapes_at(trial)
        if got is not None:
            dims, shapes = trial, got
        else:
            kept.add(largest)
    return dims, shapes


def _shapes_at(source: str, path: str, dims: dict[str, int], inputs: list, outputs: list) -> list | None:
    """The contract's input shapes and the problem's output shapes at these sizes, or None."""
    outs = _output_shapes_at(source, path, dims, inputs, outputs)
    return None if outs is None else [list(x) for x in inputs] + [list(o) for o in outs]


def _output_shapes_at(source: str, path: str, dims: dict[str, int], inputs: list, outputs: list) -> list | None:
    """The problem's output shapes at these sizes, or None where it does not build or its shapes
    there are not the contract's: each input entry at its size or its number, each named output
    entry at its size. A number in an output (a pooled length, a convolution's output width) may
    follow the sizes: the contract at the probe sizes holds it as it is there. Outputs come from the
    meta device, or from a run on the CPU for models that do not run there (the sizes are small by
    then)."""
    def at(shape: list) -> tuple:
        return tuple(dims[e] if isinstance(e, str) else e for e in shape)

    try:
        problem = load_problem(source, path, dims)
        s = meta_shapes(problem)
        outs = s.outputs if s.outputs is not None else real_output_shapes(problem, torch.device("cpu"))[0]
    except Exception:
        return None
    outs = [tuple(o) for o in outs]
    if [tuple(x) for x in s.inputs] != [at(x) for x in inputs] or len(outs) != len(outputs):
        return None
    for got, want in zip(outs, outputs):
        if len(got) != len(want) or any(g < 1 or (isinstance(w, str) and g != dims[w]) for g, w in zip(got, want)):
            return None
    return outs


def _sizes(dims: dict[str, int]) -> str:
    return ", ".join(f"{n} = {v}" for n, v in dims.items())


def describe(source: str, path: str, device: str | torch.device = "cpu", settings: dict | None = None) -> Task:
    """The task's contract. Runs the problem module several times on the meta device."""
    settings = settings or {}
    device = torch.device(device)
    nominal_problem = load_problem(source, path)
    base = meta_shapes(nominal_problem)
    notes: list[str] = []
    if base.outputs is None:
        out_shapes, out_dtypes = real_output_shapes(nominal_problem, device)
        notes.append("output shapes from a real run: the model does not run on the meta device")
    else:
        out_shapes, out_dtypes = base.outputs, base.output_dtypes

    constants = size_constants(source)
    # Which shape entries each constant moves, from one perturbed run per constant.
    moves: dict[str, tuple[int, list, list | None]] = {}
    for name, value in constants.items():
        if value < 1:
            continue
        for trial in (value + 1, 2 * value):
            try:
                shapes = meta_shapes(load_problem(source, path, {name: trial}))
            except Exception:
                continue
            if shapes.inputs != base.inputs and len(shapes.inputs) == len(base.inputs):
                moves[name] = (trial, shapes.inputs, shapes.outputs)
                break

    def entry(nominal_size: int, which: str, t: int, axis: int) -> str | int:
        named = []
        for name, (trial, ins, outs) in moves.items():
            shapes = ins if which == "in" else outs
            if shapes is None or t >= len(shapes) or axis >= len(shapes[t]):
                continue
            now = shapes[t][axis]
            if now != nominal_size:
                named.append((name, now == trial and nominal_size == constants[name]))
        if len(named) == 1 and named[0][1]:
            return named[0][0]
        if not named and which == "out" and base.outputs is None:
            # No perturbed outputs to compare: a size equal to exactly one free constant's value.
            matches = [n for n in moves if constants[n] == nominal_size]
            if len(matches) == 1:
                return matches[0]
        return nominal_size

    input_shapes = [[entry(s, "in", t, a) for a, s in enumerate(shape)] for t, shape in enumerate(base.inputs)]
    output_shapes = [[entry(s, "out", t, a) for a, s in enumerate(shape)] for t, shape in enumerate(out_shapes)]
    used = sorted({e for shape in input_shapes + output_shapes for e in shape if isinstance(e, str)},
                  key=list(constants).index)
    for name in moves:
        if name not in used:
            notes.append(f"size constant {name} changes the inputs only through a derived size: not swept")

    probe_dims = {n: constants[n] for n in used}
    budget = int(settings.get("probe_budget_bytes", PROBE_BUDGET_BYTES))
    dtypes = list(base.input_dtypes) + list(out_dtypes)
    shapes = input_shapes + output_shapes
    problem_bytes = _call_bytes(shapes, dtypes, probe_dims)
    if problem_bytes > budget:
        # Every halving made was checked to build there, so the problem builds at these sizes.
        scaled, scaled_shapes = _scaled_dims(shapes, dtypes, probe_dims, budget,
                                             lambda d: _shapes_at(source, path, d, input_shapes, output_shapes))
        # The numbers of the outputs as they are at the probe sizes.
        output_shapes = [[e if isinstance(e, str) else n for e, n in zip(shape, got)]
                         for shape, got in zip(output_shapes, scaled_shapes[len(input_shapes):])]
        notes.append(f"the problem's sizes ({_sizes(probe_dims)}) take {problem_bytes / 2**20:.0f} MiB per call, over "
                     f"the probe budget of {budget / 2**20:.0f} MiB: the gates probe at {_sizes(scaled)}; "
                     "the standard check runs at the problem's own sizes")
        probe_dims = scaled

    input_names = _input_names(nominal_problem, base.positions, base.count)
    output_names = ["output"] if len(out_shapes) == 1 else [f"output{i}" for i in range(len(out_shapes))]
    cap = memory_cap_bytes(settings)
    document = {
        "contract": {
            "id": _contract_id(path),
            "version": "1",
            "scope": f"KernelBench problem {path}: an opaque task judged under the envelope error model; "
            "input values come from its get_inputs()",
        },
        "dims": [{"name": n, "nominal": probe_dims[n], "free": True, "min": 1} for n in used],
        "inputs": [
            {
                "name": name,
                "dtype": kcv_dtype(dtype),
                "shape": shape,
                "domain": {"nonfinite": dtype.is_floating_point, "subnormal": dtype.is_floating_point},
            }
            for name, dtype, shape in zip(input_names, base.input_dtypes, input_shapes)
        ],
        "outputs": [
            {"name": name, "dtype": kcv_dtype(dtype), "shape": shape,
             "tolerance": {"model": "envelope", "accumulator": "f32"}}
            for name, dtype, shape in zip(output_names, out_dtypes, output_shapes)
        ],
        "semantics": {"determinism": "run_to_run"},
        "oracle": {"name": ORACLE, "controls": [CONTROL]},
        "measurement": {"seeds": 5, "runs": 3, "timeout_s": float(settings.get("stage_timeout_s", 300)),
                        "memory_cap_bytes": cap},
    }
    contract = _core.Contract(json.dumps(document), path)
    return Task(contract, document, source, path, constants, used, base.positions, input_names, output_names, notes)
