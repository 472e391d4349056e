"""Problems and candidates in the KernelBench convention, loaded exactly as KernelBench loads them.

A problem module defines ``Model``, ``get_inputs()`` and ``get_init_inputs()`` and module-level
integer size constants (``batch_size = 128``). A candidate module defines ``ModelNew`` (or, as a
fallback, its own ``Model``). KernelBench's evaluator (``src/kernelbench/eval.py``) does this:

- the problem source is ``exec``'d into a fresh dict, the *context*;
- a CUDA candidate (``torch.utils.cpp_extension.load_inline``) is ``exec``'d into the same
  context, after a line that points ``TORCH_EXTENSIONS_DIR`` at a build directory;
- a Triton (or TileLang, CuTe) candidate is written to a temporary ``.py`` file and imported from
  it, because ``@triton.jit`` reads the function's source from a file;
- ``set_seed(seed)`` seeds torch's CPU and CUDA generators before the init inputs, before each
  model is built, and before each trial's inputs;
- the standard check draws 5 trial seeds with ``torch.randint(0, 2**32 - 1, (1,))`` after
  ``torch.manual_seed(42)``, runs the reference first and the candidate second on the very same
  input tensors, and compares with ``torch.allclose``.

:func:`standard_check` reproduces that check and reports it at both tolerances KernelBench has
used (1e-2, its fp32 tolerance until late 2025, and 1e-4 since).
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

TEMPFILE_BACKENDS = ("triton", "tilelang", "cute")


class LoadError(RuntimeError):
    """A problem or candidate that cannot be loaded; ``code`` names the kind of failure."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def set_seed(seed: int) -> None:
    """KernelBench's ``set_seed``: torch's CPU generator and the current CUDA device's."""
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


# --------------------------------------------------------------------------------------------
# Size constants


def _integer_value(node: ast.expr) -> int | None:
    """The value of an integer constant expression (``4096``, ``2048 * 2``), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _integer_value(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Pow)):
        a, b = _integer_value(node.left), _integer_value(node.right)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Pow):
            return a**b if 0 <= b <= 64 else None
        if isinstance(node.op, ast.FloorDiv):
            return a // b if b else None
        return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]
    return None


def _bindings(node: ast.stmt) -> list[tuple[str, ast.expr]] | None:
    """The (name, value expression) pairs of a module-level assignment whose every name gets an
    integer constant expression: ``n = 4096``, chained ``height = width = 256`` and unpacked
    ``height, width = 128, 128`` (a tuple of names from a tuple of the same length); else None."""
    if not isinstance(node, ast.Assign):
        return None
    pairs: list[tuple[str, ast.expr]] = []
    for target in node.targets:
        if isinstance(target, ast.Name):
            pairs.append((target.id, node.value))
        elif (
            isinstance(target, ast.Tuple)
            and isinstance(node.value, ast.Tuple)
            and len(target.elts) == len(node.value.elts)
            and all(isinstance(e, ast.Name) for e in target.elts)
        ):
            pairs.extend((e.id, v) for e, v in zip(target.elts, node.value.elts))
        else:
            return None
    return pairs if all(_integer_value(v) is not None for _, v in pairs) else None


def _constant_assignments(source: str) -> dict[str, tuple[ast.Assign, ast.expr]]:
    """Module-level integer constants by name, with their statement and value expression; the
    last assignment of a name wins."""
    found: dict[str, tuple[ast.Assign, ast.expr]] = {}
    for node in ast.parse(source).body:
        for name, value in _bindings(node) or []:
            found[name] = (node, value)
    return found


def size_constants(source: str) -> dict[str, int]:
    """The module-level integer constants of a problem source, by name, in source order."""
    return {name: _integer_value(value) for name, (_, value) in _constant_assignments(source).items()}


def override_constants(source: str, overrides: dict[str, int]) -> str:
    """The source with the named constants' values replaced; everything else is unchanged.

    The value expression itself is rewritten in the text, so constants derived from the
    overridden ones (``input_shape = (num_classes,)``) follow when the source runs again.
    """
    if not overrides:
        return source
    assignments = _constant_assignments(source)
    unknown = sorted(set(overrides) - set(assignments))
    if unknown:
        raise KeyError(f"no module-level integer constant named {', '.join(unknown)}")
    lines = source.splitlines(keepends=True)
    # One edit per statement. A plain assignment gets its value expression replaced. A chained
    # one (height = width = 256) or an unpacking one (height, width = 256, 256) becomes one
    # assignment per name on the same line, so that its names can take different values:
    # height = 128; width = 256.
    edits: dict[int, tuple[ast.Assign, dict[str, int]]] = {}
    for name, v in overrides.items():
        node = assignments[name][0]
        edits.setdefault(id(node), (node, {}))[1][name] = int(v)
    # Edit from the end of the file so that earlier offsets stay valid.
    for node, values in sorted(edits.values(), key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        pairs = _bindings(node)
        if len(pairs) == 1:
            span, text = node.value, repr(next(iter(values.values())))
        else:
            span = node
            text = "; ".join(
                f"{name} = {repr(values[name]) if name in values else ast.get_source_segment(source, value)}"
                for name, value in pairs
            )
        first, last = span.lineno - 1, span.end_lineno - 1
        head = lines[first][: _byte_to_char(lines[first], span.col_offset)]
        tail = lines[last][_byte_to_char(lines[last], span.end_col_offset) :]
        lines[first : last + 1] = [head + text + tail]
    return "".join(lines)


def sizes_reach_models(source: str, names: set[str]) -> bool:
    """Whether the problem's models could depend on the named size constants other than through
    get_init_inputs(): a function or class of the module (get_inputs and get_init_inputs aside)
    that reads one of them, or a module-level value computed from one. Where they cannot, the
    models built for two sizes with equal init arguments are the same models."""
    if not names:
        return False
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True

    def reads(node: ast.AST, tainted: set[str]) -> bool:
        return any(isinstance(n, ast.Name) and n.id in tainted for n in ast.walk(node))

    tainted = set(names)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("get_inputs",
                                                                                        "get_init_inputs"):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if reads(node, tainted):
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if node.value is not None and reads(node.value, tainted):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                tainted |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif reads(node, tainted):
            return True
    return False


def _byte_to_char(line: str, byte_offset: int) -> int:
    """ast column offsets count UTF-8 bytes."""
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


# --------------------------------------------------------------------------------------------
# Problems


@dataclass
class Problem:
    """A problem module executed once (with size constants possibly overridden)."""

    source: str
    path: str
    context: dict
    overrides: dict[str, int] = field(default_factory=dict)

    @property
    def Model(self) -> type:
        return self.context["Model"]

    @property
    def get_inputs(self) -> Callable[[], list]:
        return self.context["get_inputs"]

    @property
    def get_init_inputs(self) -> Callable[[], list]:
        return self.context["get_init_inputs"]


def read_source(path: str | os.PathLike) -> str:
    return Path(path).read_text(encoding="utf-8")


def load_problem(source: str, path: str = "<string>", overrides: dict[str, int] | None = None) -> Problem:
    """Executes a problem source into a fresh context, as ``load_original_model_and_inputs``."""
    overrides = dict(overrides or {})
    text = override_constants(source, overrides)
    context: dict[str, Any] = {}
    try:
        code = compile(text, path, "exec")
    except SyntaxError as e:
        raise LoadError("reference-syntax", f"syntax error in the problem {path}: {e}") from e
    try:
        exec(code, context)
    except Exception as e:
        raise LoadError("reference-load", f"the problem {path} failed to run: {type(e).__name__}: {e}") from e
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in context]
    if missing:
        raise LoadError("reference-incomplete", f"the problem {path} does not define {', '.join(missing)}")
    return Problem(source=source, path=path, context=context, overrides=overrides)


# --------------------------------------------------------------------------------------------
# Candidates


def detect_backend(source: str) -> str:
    """'triton' when the candidate imports Triton (it must be imported from a file), else 'cuda'."""
    if re.search(r"^\s*(import\s+triton|from\s+triton\b)", source, re.MULTILINE):
        return "triton"
    return "cuda"


@dataclass
class Candidate:
    cls: type
    backend: str
    build_dir: str
    tempfile: str | None = None   # the module file of a tempfile-imported candidate


def _pick_class(namespace: dict, reference_model: type | None, where: str) -> type:
    """ModelNew, else a Model the candidate defined itself (not the problem's, in a shared context)."""
    cls = namespace.get("ModelNew")
    if cls is None:
        own = namespace.get("Model")
        if own is not None and own is not reference_model:
            cls = own
    if cls is None:
        raise LoadError("candidate-incomplete", f"the candidate {where} defines neither ModelNew nor Model")
    if not isinstance(cls, type):
        raise LoadError("candidate-incomplete", f"ModelNew in the candidate {where} is not a class")
    return cls


def load_candidate(
    source: str,
    path: str,
    context: dict,
    build_dir: str,
    backend: str | None = None,
) -> Candidate:
    """Loads a candidate as KernelBench does; `context` is the problem's context (CUDA path)."""
    backend = (backend or detect_backend(source)).lower()
    os.makedirs(build_dir, exist_ok=True)
    # load_inline builds under TORCH_EXTENSIONS_DIR: one private directory per candidate, so
    # that candidates never share (or race on) a compiled extension of the same name.
    os.environ["TORCH_EXTENSIONS_DIR"] = build_dir
    reference_model = context.get("Model")
    if backend in TEMPFILE_BACKENDS:
        fd, temp_path = tempfile.mkstemp(suffix=".py", prefix="kcv_candidate_", dir=build_dir)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location("temp_module", temp_path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except SyntaxError as e:
            raise LoadError("candidate-syntax", f"syntax error in the candidate {path}: {e}") from e
        except Exception as e:
            raise LoadError("candidate-load", f"the candidate {path} failed to load: {type(e).__name__}: {e}") from e
        return Candidate(_pick_class(vars(module), None, path), backend, build_dir, temp_path)

    prelude = "import os\n" f"os.environ['TORCH_EXTENSIONS_DIR'] = {build_dir!r}\n"
    text = prelude + source
    context["BUILD_DIRECTORY"] = build_dir
    try:
        code = compile(text, "<string>", "exec")
    except SyntaxError as e:
        raise LoadError("candidate-syntax", f"syntax error in the candidate {path}: {e}") from e
    try:
        exec(code, context)
    except Exception as e:
        raise LoadError("candidate-load", f"the candidate {path} failed to load: {type(e).__name__}: {e}") from e
    return Candidate(_pick_class(context, reference_model, path), backend, build_dir)


# --------------------------------------------------------------------------------------------
# The standard check


def process_input(x: Any, device: torch.device, precision: torch.dtype) -> Any:
    """KernelBench's ``_process_input_tensor``: every tensor is cast to the precision (integer
    and boolean tensors too) and moved to the device; anything else passes unchanged."""
    if not isinstance(x, torch.Tensor):
        return x
    return x.to(dtype=precision).to(device=device)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device=device)


@dataclass
class Session:
    """What KernelBench holds after loading: the shared context, both models, the candidate."""

    problem: Problem
    candidate: Candidate
    device: torch.device
    precision: torch.dtype
    seed: int
    get_inputs: Callable[[], list]
    original_model: torch.nn.Module | None = None
    custom_model: torch.nn.Module | None = None
    load_error: str | None = None


def open_session(
    reference_path: str,
    candidate_path: str,
    device: str | torch.device,
    build_dir: str,
    backend: str | None = None,
    seed: int = 42,
    precision: torch.dtype = torch.float32,
) -> Session:
    """The prelude of ``eval_kernel_against_ref``: problem, init inputs, reference model, the
    candidate loaded into the same context, the candidate model. Raises LoadError when the
    problem or the candidate cannot be loaded; a candidate whose constructor fails still gives
    a session (with ``load_error``), as KernelBench counts it compiled but incorrect."""
    device = torch.device(device)
    problem = load_problem(read_source(reference_path), str(reference_path))
    get_inputs, get_init_inputs, Model = problem.get_inputs, problem.get_init_inputs, problem.Model
    set_seed(seed)
    init_inputs = [process_input(x, device, precision) for x in get_init_inputs()]
    with torch.no_grad():
        set_seed(seed)
        original_model = Model(*init_inputs)
    candidate = load_candidate(read_source(candidate_path), str(candidate_path), problem.context, build_dir, backend)
    _synchronize(device)
    session = Session(problem, candidate, device, precision, seed, get_inputs, original_model)
    try:
        with torch.no_grad():
            set_seed(seed)
            custom_model = candidate.cls(*init_inputs)
            session.original_model = original_model.to(device=device, dtype=precision)
            session.custom_model = custom_model.to(device=device, dtype=precision)
            _synchronize(device)
    except Exception as e:
        session.load_error = f"{type(e).__name__}: {e}"
    return session


def failed_check(error: str | None, trials: int = 5) -> dict:
    """A standard check that no trial passed, ended by ``error`` (None: not ended early)."""
    return {"tol_1e-2": False, "tol_1e-4": False, "max_abs_diff": None, "trials": trials,
            "passed_1e-2": 0, "passed_1e-4": 0, "error": error}


def standard_check(session: Session, trials: int = 5) -> dict:
    """``run_and_check_correctness`` at atol = rtol = 1e-2 and at 1e-4 on the same outputs.

    Returns {"tol_1e-2", "tol_1e-4", "max_abs_diff", "trials", "passed_1e-2", "passed_1e-4",
    "error", "phases_s"}: a trial that raises or changes the output's shape ends the check, as in
    KernelBench; one that raised adds "raised_by": "reference" or "candidate".
    """
    result = failed_check(session.load_error, trials)
    if session.load_error is not None:
        return result
    device, precision = session.device, session.precision
    torch.manual_seed(session.seed)
    trial_seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(trials)]
    worst = 0.0
    # Where the check's time goes (seconds, summed over the trials): making the inputs on the host
    # and moving them, moving the models, each model's calls, and the comparisons.
    phases = result["phases_s"] = dict.fromkeys(("inputs", "models", "reference", "candidate", "compare"), 0.0)
    clock = time.perf_counter

    def lap(phase: str, began: float) -> float:
        now = clock()
        phases[phase] += now - began
        return now

    with torch.no_grad():
        for trial_seed in trial_seeds:
            began = clock()
            set_seed(trial_seed)
            inputs = [process_input(x, device, precision) for x in session.get_inputs()]
            _synchronize(device)
            began = lap("inputs", began)
            set_seed(trial_seed)
            model = session.original_model.to(device=device, dtype=precision)
            set_seed(trial_seed)
            model_new = session.custom_model.to(device=device, dtype=precision)
            _synchronize(device)
            began = lap("models", began)
            # KernelBench ends the check on any exception; the record also says whose it was,
            # since casting every input to float32 can make the reference itself raise.
            raised_by = "reference"
            try:
                output = model(*inputs)
                _synchronize(device)
                began = lap("reference", began)
                raised_by = "candidate"
                output_new = model_new(*inputs)
                _synchronize(device)
                began = lap("candidate", began)
                raised_by = None
                if output.shape != output_new.shape:
                    result["error"] = f"Output shape mismatch: Expected {output.shape}, got {output_new.shape}"
                    return result
                diff = torch.max(torch.abs(output - output_new)).item() if output.numel() else 0.0
                worst = diff if diff != diff else max(worst, diff)
                result["max_abs_diff"] = worst
                if torch.allclose(output, output_new, atol=1e-2, rtol=1e-2):
                    result["passed_1e-2"] += 1
                if torch.allclose(output, output_new, atol=1e-4, rtol=1e-4):
                    result["passed_1e-4"] += 1
                lap("compare", began)
            except Exception as e:
                result["error"] = f"{type(e).__name__}: {e}"
                result["raised_by"] = raised_by
                return result
    result["tol_1e-2"] = result["passed_1e-2"] == trials
    result["tol_1e-4"] = result["passed_1e-4"] == trials
    return result
