"""The ambient state a candidate's call runs under.

A candidate runs under the state the process had after it was loaded (whatever its module set at
import, on top of kcv's strict defaults), plus the toggle a probe asks for: the CPU state of
probe calls (FTZ/DAZ, thread count, as for native kernels) and, for CMP-02, PyTorch's global
state (``probe.note["torch_env"]``). Everything is restored after the call, so the reference and
the controls never run under a candidate's toggles.

GPU toggles: ``side-stream`` runs the call with a fresh non-default stream current;
``cuda-graph`` captures the call in a CUDA graph and replays it. In every case the caller
synchronises only the stream that was current for the call before reading the outputs: work a
candidate leaves on another stream it did not join is its own bug.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from . import _core
from .reference import precision_flags, set_precision_flags

TORCH_TOGGLES = ("tf32", "deterministic", "cuda-graph", "side-stream")


@contextlib.contextmanager
def cpu_state(ftz: bool, daz: bool, threads: int) -> Iterator[None]:
    """MXCSR flush-to-zero / denormals-are-zero of the calling thread, and torch's thread count."""
    saved_csr = _core.get_mxcsr()
    saved_threads = torch.get_num_threads()
    csr = saved_csr
    if ftz:
        csr |= _core.MXCSR_FTZ
    if daz:
        csr |= _core.MXCSR_DAZ
    _core.set_mxcsr(csr)
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        _core.set_mxcsr(saved_csr)
        torch.set_num_threads(saved_threads)


@contextlib.contextmanager
def torch_state(flags: dict, toggle: str | None) -> Iterator[None]:
    """The candidate's precision flags, with a CMP-02 global toggle on top."""
    saved_flags = precision_flags()
    saved_deterministic = torch.are_deterministic_algorithms_enabled()
    set_precision_flags(flags)
    if toggle == "tf32":
        set_precision_flags(
            {
                **flags,
                "matmul.allow_tf32": True,
                "cudnn.allow_tf32": True,
                "float32_matmul_precision": "high",
            }
        )
    elif toggle == "deterministic":
        torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(saved_deterministic)
        set_precision_flags(saved_flags)


@dataclass
class CallEnv:
    ftz: bool = False
    daz: bool = False
    threads: int = 0
    torch_env: str | None = None

    @staticmethod
    def of(call: dict, probe: dict) -> "CallEnv":
        env = call.get("env", {})
        note = probe.get("note") or {}
        return CallEnv(bool(env.get("ftz")), bool(env.get("daz")), int(env.get("threads", 0)), note.get("torch_env"))


def run_call(fn: Callable[[], Any], env: CallEnv, flags: dict, device: torch.device) -> tuple[Any, "torch.cuda.Stream | None"]:
    """Runs fn() under the call's ambient state; returns its value and the stream it ran on.

    The stream is the one to synchronise (and to read the outputs on); None on the CPU.
    """
    with cpu_state(env.ftz, env.daz, env.threads), torch_state(flags, env.torch_env):
        if device.type != "cuda":
            return fn(), None
        caller = torch.cuda.current_stream(device)
        if env.torch_env == "side-stream":
            stream = torch.cuda.Stream(device)
            stream.wait_stream(caller)
            with torch.cuda.stream(stream):
                return fn(), stream
        if env.torch_env == "cuda-graph":
            return _graphed(fn, device), torch.cuda.current_stream(device)
        return fn(), caller


def _graphed(fn: Callable[[], Any], device: torch.device) -> Any:
    """Captures fn() in a CUDA graph (after one warm-up call on a side stream) and replays it."""
    caller = torch.cuda.current_stream(device)
    warm = torch.cuda.Stream(device)
    warm.wait_stream(caller)
    with torch.cuda.stream(warm):
        fn()
    caller.wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    graph.replay()
    return out
