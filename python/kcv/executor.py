"""The Python executor: runs a gate's probes on the reference, the control and a candidate.

libkcv plans the probes (``_core.plan``) and judges what was measured (``_core.judge``); this
module only runs things and records facts, as ``src/execution/execute.cpp`` does for native
kernels. For each call of a probe, in order, on one loaded candidate:

1. inputs: ``get_inputs()`` of the problem (with the probe's size constants) after seeding with
   the call's input seed; libkcv turns those task values into the probe's value family and
   injects special values (``_core.apply_family`` / ``_core.inject_specials``). The values are
   written into input buffers that kcv owns: on the CPU between guard bands (RES-01), on a GPU
   from the guarded allocator. A probe's calls reuse its input buffers, as a caller reusing its
   buffers would, so a candidate that caches on an address is seen.
2. the float64 reference (:mod:`kcv.reference`) on widened copies; its outputs go to libkcv at
   once and are freed before the candidate runs, so a candidate cannot find them in memory.
3. the candidate, under the call's ambient state (:mod:`kcv.environment`), after the output
   poison was put where its allocations will come from (:mod:`kcv.allocator`). Outputs are read
   after synchronising only the stream that was current for the call.
4. facts: status and error, input hashes before and after, address ranges, guard damage.
5. the positive control (the fp32 ``Model``) on fresh copies of the same input values.

Outputs of a probe's calls stay alive until the probe ends, so that an address shared by two
outputs means aliasing, not reuse of freed memory.
"""

from __future__ import annotations

import atexit
import collections
import copy
import functools
import gc
import json
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from . import _core
from . import allocator as alloc
from .environment import CallEnv, run_call
from .kernelbench import Problem, load_problem, set_seed, sizes_reach_models
from .reference import ReferencePrecisionError, as_float64, run_control, run_reference, widen
from .task import Task, as_outputs

# KernelBench builds every model right after set_seed(42): the task's parameters are these.
WEIGHT_SEED = 42
# Host memory kept for reference outputs across probes (least recently used dropped first).
REFERENCE_CACHE_BYTES = 2 << 30

# The CUDA errors after which a context is lost, as PyTorch words them (its messages mention
# "device-side assertions" in a hint on every CUDA error, so the phrases must be exact).
_STICKY_CUDA_ERRORS = ("an illegal memory access was encountered", "device-side assert triggered",
                       "unspecified launch failure", "misaligned address", "an illegal instruction was encountered")


class DeviceFault(BaseException):
    """The CUDA context is broken (an illegal address, a device-side assert): nothing more can
    run in this process. It is not an Exception, so no handler on the way turns it into a
    verdict; the worker's child dies and its parent records a crash of the gate in progress."""


def _raise_if_sticky(e: BaseException, device: torch.device) -> None:
    if device.type == "cuda" and any(s in str(e) for s in _STICKY_CUDA_ERRORS):
        raise DeviceFault(f"{type(e).__name__}: {e}") from e


@dataclass
class Models:
    dims_key: tuple
    problem: Problem
    init: list   # get_init_inputs() as the models were built from it
    reference: torch.nn.Module
    control: torch.nn.Module
    candidate: torch.nn.Module | None
    candidate_error: str = ""


def _span(t: torch.Tensor) -> list[int]:
    """[lo, hi) of the bytes the tensor's elements occupy."""
    base, item = t.data_ptr(), t.element_size()
    if t.numel() == 0:
        return [base, base]
    lo = sum(min(0, (s - 1) * st) for s, st in zip(t.shape, t.stride()))
    hi = sum(max(0, (s - 1) * st) for s, st in zip(t.shape, t.stride()))
    return [base + lo * item, base + (hi + 1) * item]


def _init_key(init: list) -> tuple:
    """The init arguments by value: tensors by content, shape and dtype."""
    return tuple(f"{_core.content_hash(x.detach().cpu().contiguous())}{tuple(x.shape)}{x.dtype}"
                 if isinstance(x, torch.Tensor) else f"{type(x).__name__}:{x!r}" for x in init)


def _host(t: torch.Tensor) -> torch.Tensor:
    """A host copy, never a view: what was read stays what it was when it was read."""
    return t.detach().to("cpu", copy=True).contiguous()


def _poisoned(shape: tuple, dtype: torch.dtype, poison: dict) -> torch.Tensor:
    """An output that was never written: its bytes are the call's poison."""
    t = torch.empty(shape, dtype=dtype)
    t.reshape(-1).view(torch.uint8).fill_(int(poison.get("byte", 0xFF)) if "byte" in poison else 0xFF)
    return t


_DTYPES = {v: k for k, v in {
    torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
    torch.bool: "bool"}.items()}


@dataclass
class GateRun:
    """What one gate's execution produced, before and after judging."""

    outcomes: "_core.Outcomes"
    skipped: list[dict] = field(default_factory=list)
    probe_ids: list[str] = field(default_factory=list)


class Executor:
    """Runs probes for one task and one loaded candidate class on one device."""

    def __init__(self, task: Task, candidate_cls: type, device: str | torch.device, candidate_flags: dict,
                 settings: dict | None = None):
        self.task = task
        self.cls = candidate_cls
        self.device = torch.device(device)
        self.flags = candidate_flags
        self.settings = dict(settings or {})
        self._models: Models | None = None
        # The reference and the control of the latest init arguments: sizes that change only what
        # get_inputs() makes (a batch, a length) need no new ones; the candidate is built anew.
        self._shared: tuple | None = None
        self._shared_names: set[str] = set()
        self.gpu_allocator = alloc.installed() if self.device.type == "cuda" else None
        # y* (and the fp32 control's output) by the sizes and the exact argument values: the
        # control's run of a probe and the candidate's, repeated calls and gates that share inputs
        # (ORD-01, ORD-03) need each once.
        self._references: collections.OrderedDict[tuple, list[torch.Tensor]] = collections.OrderedDict()
        self._reference_bytes = 0

    # ----------------------------------------------------------------------------------------
    # Models per size

    def models(self, dims: dict[str, int]) -> Models:
        """Reference (fp64), control (fp32) and candidate at these sizes; the latest is kept."""
        overrides = self._overrides(dims)
        key = tuple(sorted(overrides.items()))
        if self._models is not None and self._models.dims_key == key:
            return self._models
        self._models = None
        gc.collect()
        problem = load_problem(self.task.source, self.task.path, overrides)
        init = self._init_inputs(problem)
        shared_key = self._shared_key(overrides, init)
        with torch.no_grad():
            if shared_key is not None and self._shared is not None and self._shared[0] == shared_key:
                reference, control = self._shared[1], self._shared[2]
            else:
                self._shared = None
                reference, control = self._reference_and_control(problem, init)
                if shared_key is not None:
                    self._shared = (shared_key, reference, control)
            candidate, error = self._new_candidate(init)
        self._models = Models(key, problem, init, reference, control, candidate, error)
        # What exists now (torch and its lazily imported parts, the modules, these models) lives
        # at least until the next size. Freezing it keeps the gc.collect() before every call, which
        # makes freed tensors go back to the allocator, from walking that whole heap (~0.2 s each).
        gc.freeze()
        _unfreeze_at_exit()
        return self._models

    def _overrides(self, dims: dict[str, int]) -> dict[str, int]:
        """The size constants these dimensions set to other than their nominal values."""
        return {n: int(v) for n, v in dims.items() if self.task.nominal.get(n) != v}

    def _new_candidate(self, init: list) -> tuple[torch.nn.Module | None, str]:
        """The candidate built from the weight seed, float32 on the device; or None and the error."""
        try:
            set_seed(WEIGHT_SEED)
            return self.cls(*init).to(device=self.device, dtype=torch.float32), ""
        except Exception as e:
            return None, f"{type(e).__name__}: {e}"

    def _init_inputs(self, problem: Problem) -> list:
        """get_init_inputs() after the weight seed, its tensors float32 on the device."""
        set_seed(WEIGHT_SEED)
        return [x.to(device=self.device, dtype=torch.float32) if isinstance(x, torch.Tensor) else x
                for x in problem.get_init_inputs()]

    def _reference_and_control(self, problem: Problem, init: list) -> tuple[torch.nn.Module, torch.nn.Module]:
        """The problem's Model, initialised once from the weight seed: a float64 copy is the
        reference and the model itself, in float32, the control. Two initialisations from the same
        seed draw the same weights, and on a large layer drawing them on the host is most of what
        a new size costs (a 4097 × 32768 Linear takes about a second). A model that cannot be
        copied is initialised again."""
        set_seed(WEIGHT_SEED)
        model = problem.Model(*init)
        try:
            reference = copy.deepcopy(model)
        except Exception:
            set_seed(WEIGHT_SEED)
            reference = problem.Model(*init)
        return as_float64(reference.to(self.device)), model.to(device=self.device, dtype=torch.float32)

    def _shared_key(self, overrides: dict[str, int], init: list) -> tuple | None:
        """What identifies the problem's models at these sizes (the init arguments), or None where
        a size constant could reach the models some other way and each size builds its own."""
        names = set(overrides) | self._shared_names
        if sizes_reach_models(self.task.source, names):
            return None
        self._shared_names |= set(overrides)
        return _init_key(init)

    def _primed_candidate(self, m: Models, prime: dict) -> tuple[torch.nn.Module | None, str]:
        """A candidate of its own for a probe that libkcv primes (``Probe::prime_dims``): built at
        the probe's sizes, then called once at the priming sizes on the problem's inputs of the
        priming seed; what that call returns is not looked at. None and the reason where the
        problem's init arguments differ between the two sizes: no one instance serves both."""
        problem = load_problem(self.task.source, self.task.path, self._overrides(prime["dims"]))
        if _init_key(self._init_inputs(problem)) != _init_key(m.init):
            return None, "the problem's init arguments differ at the priming sizes, so no one instance serves both"
        with torch.no_grad():
            candidate, error = self._new_candidate(m.init)
            if candidate is None:
                return None, f"the candidate built once but not again: {error}"
            set_seed(int(prime["input_seed"]))
            args = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
            try:
                run_call(lambda: candidate(*args), CallEnv(), self.flags, self.device)
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
            except Exception as e:
                _raise_if_sticky(e, self.device)
                if isinstance(e, torch.OutOfMemoryError):
                    raise
        return candidate, ""

    def _external_reference(self, dims: dict[str, int], inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """y* for inputs a gate made itself (EXC-02 flushes subnormals, PRC-03 rounds operands):
        the float64 Model at the probe's sizes; arguments that are not the task's tensors are
        what get_inputs() gives."""
        m = self.models(dims)
        set_seed(0)
        args = list(m.problem.get_inputs())
        for pos, x in zip(self.task.positions, inputs):
            args[pos] = widen(x.to(self.device))
        return [_host(o) for o in run_reference(m.reference, args)]

    def forget_models(self) -> None:
        self._models = None
        self._shared = None
        gc.collect()

    # ----------------------------------------------------------------------------------------
    # Inputs

    def _family_of(self, probe: dict, name: str, floating: bool) -> tuple[dict, dict | None]:
        chosen = None
        for o in probe.get("overrides", []):
            if o.get("input") == name:
                chosen = o
                break
            if not o.get("input") and chosen is None:
                chosen = o
        if chosen is not None:
            return chosen.get("family", {"kind": "task"}), chosen.get("specials")
        return (probe.get("family", {"kind": "task"}) if floating else {"kind": "task"}), None

    def _values(self, problem: Problem, probe: dict, call: dict) -> tuple[list, list[torch.Tensor], list[int]]:
        """The call's arguments (task values transformed by libkcv) as CPU tensors."""
        seed = int(call["input_seed"])
        set_seed(seed)
        raw = list(problem.get_inputs())
        values, injected = [], []
        for name, pos in zip(self.task.input_names, self.task.positions):
            task_values = raw[pos].detach().to("cpu").contiguous()
            floating = task_values.is_floating_point()
            family, specials = self._family_of(probe, name, floating)
            v = task_values
            input_seed = _core.derive_seed(seed, name)
            if floating:
                v = _core.apply_family(self.task.contract, name, task_values, json.dumps(family), input_seed)
                if specials is not None:
                    v, hit = _core.inject_specials(self.task.contract, name, v, task_values, json.dumps(specials),
                                                   _core.derive_seed(input_seed, "specials"))
                    if not injected:
                        injected = list(hit)
            values.append(v)
        return raw, values, injected

    def _storage(self, probe: dict, values: list[torch.Tensor]) -> list:
        """One buffer per input for the whole probe: guarded host memory, or guarded device memory."""
        out = []
        for name, v in zip(self.task.input_names, values):
            if self.device.type == "cuda":
                out.append((name, None, torch.empty(v.shape, dtype=v.dtype, device=self.device)))
            else:
                dtype = next(k for k, t in _DTYPES.items() if t == v.dtype)
                g = _core.GuardedHostTensor(dtype, list(v.shape), int(probe.get("guard_bytes", 4096)),
                                            json.dumps(probe.get("guard_poison", {"byte": 165})))
                out.append((name, g, g.tensor()))
        return out

    # ----------------------------------------------------------------------------------------
    # Probes

    def run_probe(self, probe: dict, outcomes: "_core.Outcomes", role: str = "candidate") -> dict | None:
        """Runs one probe and adds its outcome; returns a skip record when the reference cannot
        run at the probe's sizes (CMP-01), else None."""
        contract = self.task.contract
        try:
            m = self.models(probe["dims"])
        except Exception as e:
            if probe["gate"] == "CMP-01":
                return {"probe": probe["id"], "reason": f"the problem does not build at these sizes: {type(e).__name__}: {e}"}
            outcomes.add_probe(contract, json.dumps(probe), [], f"cannot build the models: {type(e).__name__}: {e}")
            return None
        model = m.candidate if role == "candidate" else m.control
        if probe.get("prime") and role == "candidate" and model is not None:
            model, reason = self._primed_candidate(m, probe["prime"])
            if model is None:
                return {"probe": probe["id"], "reason": reason}
        index = None
        storage = None
        keep_alive: list = []
        if probe.get("check_guards") and self.gpu_allocator is not None:
            # Only the gates that judge guard damage look for it (reading every band and the
            # quarantine back costs tens of milliseconds a call); what earlier calls did to them is
            # made history here, so that this probe's calls answer for their own damage alone.
            self.gpu_allocator.repoison_guards()
        try:
            for k, call in enumerate(probe["calls"]):
                raw, values, injected = self._values(m.problem, probe, call)
                if storage is None:
                    storage = self._storage(probe, values)
                for (_, _, buf), v in zip(storage, values):
                    buf.copy_(v)
                args = list(raw)
                for pos, (_, _, buf) in zip(self.task.positions, storage):
                    args[pos] = buf

                reference, reference_error = [], ""
                key = self._reference_key(m, raw, values)
                if key in self._references:
                    self._references.move_to_end(key)
                    reference = self._references[key]
                else:
                    try:
                        ref_args = [widen(a) if isinstance(a, torch.Tensor) else a for a in args]
                        reference = [_host(o) for o in run_reference(m.reference, ref_args)]
                        del ref_args
                        self._remember_reference(key, reference)
                    except ReferencePrecisionError:
                        raise
                    except Exception as e:
                        reference_error = f"{type(e).__name__}: {e}"
                if reference_error and probe["gate"] == "CMP-01" and index is None:
                    return {"probe": probe["id"], "reason": f"the reference fails at these sizes: {reference_error}"}
                if index is None:
                    index = outcomes.add_probe(contract, json.dumps(probe), [list(r.shape) for r in reference], "",
                                               injected)
                self._call(probe, call, k, index, outcomes, m, model, args, storage, values, reference,
                           reference_error, keep_alive, key)
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
            if index is None:
                outcomes.add_probe(contract, json.dumps(probe), [], message)
            else:
                raise RuntimeError(f"probe {probe['id']}: {message}") from e
        finally:
            keep_alive.clear()
        return None

    def _reference_key(self, m: Models, raw: list, values: list[torch.Tensor]) -> tuple:
        """The sizes and the exact values of the reference's arguments."""
        others = [a for i, a in enumerate(raw) if i not in self.task.positions]
        return (m.dims_key, *(f"{_core.content_hash(v)}{tuple(v.shape)}{v.dtype}" if isinstance(v, torch.Tensor)
                              else repr(v) for v in [*values, *others]))

    def _remember_reference(self, key: tuple, reference: list[torch.Tensor]) -> None:
        self._references[key] = reference
        self._reference_bytes += sum(r.numel() * r.element_size() for r in reference)
        while self._reference_bytes > REFERENCE_CACHE_BYTES and len(self._references) > 1:
            _, old = self._references.popitem(last=False)
            self._reference_bytes -= sum(r.numel() * r.element_size() for r in old)

    def _call(self, probe, call, k, index, outcomes, m, model, args, storage, values, reference, reference_error,
              keep_alive, key: tuple) -> None:
        specs = self.task.document["outputs"]
        inputs_before = [_host(buf) for _, _, buf in storage]
        facts = {
            "input_hash_before": [_core.content_hash(t) for t in inputs_before],
            "input_ranges": [_span(buf) for _, _, buf in storage],
        }
        poison = call.get("output_poison", {"byte": 255})
        if self.gpu_allocator is not None:
            self.gpu_allocator.set_poison("fill", poison)
        else:
            alloc.groom_host_heap([r.numel() * _element_size(s["dtype"]) for r, s in zip(reference, specs)], poison)
        # Cyclic garbage of the previous calls sits in the young generations; a full collection
        # would walk everything imported lazily since the models were frozen, at every call.
        gc.collect(1)

        status, error, outs, host = 0, "", [], []
        started = time.perf_counter()
        if model is None:
            status, error = 1, "the candidate could not be built: " + m.candidate_error
        else:
            try:
                with torch.no_grad():
                    value, stream = run_call(lambda: model(*args), CallEnv.of(call, probe), self.flags, self.device)
                outs = as_outputs(value)
                if stream is not None:
                    with torch.cuda.stream(stream):
                        host = [_host(o) if isinstance(o, torch.Tensor) else o for o in outs]
                else:
                    host = [_host(o) if isinstance(o, torch.Tensor) else o for o in outs]
            except Exception as e:
                _raise_if_sticky(e, self.device)
                if isinstance(e, torch.OutOfMemoryError):
                    # The device ran out under this worker and its neighbours: a fault of the
                    # machine, not an answer of the candidate; the gate reports an error.
                    raise
                status, error = 1, f"{type(e).__name__}: {e}"
        facts["seconds"] = time.perf_counter() - started
        if self.device.type == "cuda":
            try:
                torch.cuda.synchronize(self.device)
            except Exception as e:
                _raise_if_sticky(e, self.device)
                raise
        if status == 0:
            problem = _shape_problem(host, reference, specs)
            if problem:
                status, error = 2, problem
        keep_alive.append(outs)

        if status != 0:
            shapes = [tuple(r.shape) for r in reference] or [()] * len(specs)
            host = [_poisoned(shape, _DTYPES[s["dtype"]], poison) for shape, s in zip(shapes, specs)]
        facts["status"], facts["error"] = status, error
        facts["output_ranges"] = [_span(o) for o in outs if isinstance(o, torch.Tensor)] if status == 0 else []
        facts["guard_damage"] = self._guard_damage(storage, outs) if probe.get("check_guards") else []
        facts["input_hash_after"] = [_core.content_hash(_host(buf)) for _, _, buf in storage]

        controls, control_status = [], []
        # The control's output on these arguments, like y*, is needed once: a probe's control
        # pass computes it and the candidate's pass of the same probe reads it back.
        control_key = ("control", *key)
        if control_key in self._references:
            self._references.move_to_end(control_key)
            controls.append(self._references[control_key])
            control_status.append(0)
        else:
            try:
                ctl_args = list(args)
                for pos, v in zip(self.task.positions, values):
                    ctl_args[pos] = v.to(self.device)
                control = [_host(o) for o in run_control(m.control, ctl_args)]
                del ctl_args
                self._remember_reference(control_key, control)
                controls.append(control)
                control_status.append(0)
            except Exception:
                controls.append([_poisoned(tuple(r.shape), _DTYPES[s["dtype"]], {"byte": 255})
                                 for r, s in zip(reference, specs)])
                control_status.append(1)

        outcomes.add_call(index, k, inputs_before, reference, reference_error, host, controls, control_status,
                          json.dumps(facts))

    def _guard_damage(self, storage, outs) -> list[str]:
        if self.gpu_allocator is None:
            lines = [g.check_guards(f"input {name}") for name, g, _ in storage if g is not None]
            return [line for line in lines if line]
        names = {buf.data_ptr(): f"input {name}" for name, _, buf in storage}
        for i, o in enumerate(outs):
            if isinstance(o, torch.Tensor):
                names.setdefault(o.data_ptr(), f"output {i}")
        lines = alloc.describe_damage(self.gpu_allocator.check(), names)
        if lines:
            self.gpu_allocator.repoison_guards()
        return lines

    # ----------------------------------------------------------------------------------------
    # Gates

    def plan(self, gate: str) -> list[dict]:
        return json.loads(_core.plan(gate, self.task.contract, json.dumps(self.settings), str(self.device)))

    def run_gate(self, gate: str, role: str = "candidate", only_probe: str | None = None,
                 progress: Callable[[str], None] | None = None) -> dict:
        """Plans, runs and judges one gate; the GateResult as a dict."""
        probes = self.plan(gate)
        if only_probe is not None:
            probes = [p for p in probes if p["id"] == only_probe]
        return self.run_probes(gate, probes, role, progress)

    def run_probes(self, gate: str, probes: list[dict], role: str = "candidate",
                   progress: Callable[[str], None] | None = None,
                   admit: Callable[[dict], bool] | None = None) -> dict:
        """Runs these probes of the gate (as planned, or overridden) and judges them with libkcv;
        a probe that ``admit`` refuses is not run."""
        outcomes = _core.Outcomes()
        skipped = []
        settings = json.dumps(self.settings)
        ended = None
        for i, p in enumerate(probes):
            if progress:
                progress(p["id"])
            if admit is not None and not admit(p):
                continue
            ran = len(outcomes)
            skip = self.run_probe(p, outcomes, role)
            if skip:
                skipped.append(skip)
            elif len(outcomes) > ran:
                ended = _core.ends_gate(gate, self.task.contract, settings, outcomes, len(probes) - i - 1,
                                        oracle=self._external_reference)
                if ended is not None:
                    break
        if ended is None:
            ended = _core.judge(gate, self.task.contract, settings, outcomes, oracle=self._external_reference)
        result = json.loads(ended)
        if skipped:
            add_detail(result, {"skipped": skipped})
        return result

    def overridden_probe(self, gate: str, override: dict) -> tuple[dict | None, str, str]:
        """The planned probe ``override["probe"]`` of the gate with the override (dims,
        family_scale, single_special) applied by libkcv: (probe, "", "") or (None, code, reason)."""
        probe_id = override.get("probe")
        planned = next((p for p in self.plan(gate) if p["id"] == probe_id), None)
        if planned is None:
            return None, "no-such-probe", (f"gate {gate} plans no probe {probe_id!r} for {self.task.contract.id} "
                                           f"at these settings")
        applied = json.loads(_core.apply_probe_override(self.task.contract, json.dumps(planned),
                                                        json.dumps(override)))
        if "error" in applied:
            return None, applied["error"]["code"], applied["error"]["reason"]
        return applied["probe"], "", ""

    def control_failure(self, gate: str, probe: dict) -> str:
        """Fairness rule 1 for one probe: why the positive control (the fp32 Model, run as the
        candidate) does not pass it, or ''."""
        outcomes = _core.Outcomes()
        if self.run_probe(probe, outcomes, "control") is not None:
            return ""
        r = json.loads(_core.judge(gate, self.task.contract, json.dumps(self.settings), outcomes,
                                   oracle=self._external_reference))
        if r["verdict"] not in ("fail", "error"):
            return ""
        why = r["evidence"][0]["signature"] if r.get("evidence") else r["reason"]
        return f"{r['verdict']}: {why}"

    def run_gate_with_control(self, gate: str, progress: Callable[[str], None] | None = None
                              ) -> tuple[dict | None, dict[str, str]]:
        """run_gate under fairness rule 1, each probe's control run right before its candidate
        run, so that a probe's models are built once rather than once per pass. Returns the
        candidate's result over the probes the control passes (None when it passes none) and the
        excluded probes with the control's reason."""
        probes = self.plan(gate)
        excluded: dict[str, str] = {}

        def admit(p: dict) -> bool:
            why = self.control_failure(gate, p)
            if why:
                excluded[p["id"]] = why
            return not why

        result = self.run_probes(gate, probes, "candidate", progress, admit)
        if probes and len(excluded) == len(probes):
            return None, excluded
        if excluded:
            add_detail(result, {"excluded_by_control": [{"probe": k, "reason": v} for k, v in excluded.items()]})
        return result, excluded


def add_detail(result: dict, extra: dict) -> None:
    """Adds facts to a GateResult's detail, keeping what the judge put there."""
    if not isinstance(result.get("detail"), dict):
        result["detail"] = {} if result.get("detail") is None else {"judge": result["detail"]}
    result["detail"].update(extra)


@functools.cache
def _unfreeze_at_exit() -> None:
    # Frozen objects are never collected; at exit they go back to the collector, so that the
    # extension's objects held in cycles are finalised instead of reported as leaks.
    atexit.register(lambda: (gc.unfreeze(), gc.collect()))


def _element_size(kcv_dtype: str) -> int:
    return torch.empty((), dtype=_DTYPES[kcv_dtype]).element_size()


def _shape_problem(host: list, reference: list[torch.Tensor], specs: list[dict]) -> str:
    """Why the candidate's outputs cannot stand for the contract's, or ''."""
    if len(host) != len(specs):
        return f"returned {len(host)} outputs; the reference returns {len(specs)}"
    for i, o in enumerate(host):
        if not isinstance(o, torch.Tensor):
            return f"output {i} is {type(o).__name__}, not a tensor"
        if i < len(reference) and tuple(o.shape) != tuple(reference[i].shape):
            return f"Output shape mismatch: expected {tuple(reference[i].shape)}, got {tuple(o.shape)} (output {i})"
    return ""
