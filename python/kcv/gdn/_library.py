"""ctypes binding of the CUDA kernels' C interface (gdn/cuda/gdn_cuda.h).

The library is found at $KCV_GDN_CUDA_LIB, next to the installed package (kcv/lib/), or in a
build tree of the repository (build*/out/lib/). Only this module and ops.py touch it.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

import torch

_LIB_NAME = "libkcv_gdn_cuda.so"


class Params(ctypes.Structure):
    """kcv_gdn_params, field for field."""

    _fields_ = [
        ("gate", ctypes.c_int32),
        ("delta", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("B", ctypes.c_int64),
        ("T", ctypes.c_int64),
        ("H", ctypes.c_int64),
        ("HV", ctypes.c_int64),
        ("K", ctypes.c_int64),
        ("V", ctypes.c_int64),
        ("N", ctypes.c_int64),
        ("cu_seqlens", ctypes.c_void_p),
        ("scale", ctypes.c_float),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("g", ctypes.c_void_p),
        ("beta", ctypes.c_void_p),
        ("h0", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("ht", ctypes.c_void_p),
        ("d_o", ctypes.c_void_p),
        ("dht", ctypes.c_void_p),
        ("dq", ctypes.c_void_p),
        ("dk", ctypes.c_void_p),
        ("dv", ctypes.c_void_p),
        ("dg", ctypes.c_void_p),
        ("dbeta", ctypes.c_void_p),
        ("dh0", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("prepared", ctypes.c_void_p),
        ("prepared_bytes", ctypes.c_size_t),
        ("segment_chunks", ctypes.c_int32),
    ]


_DTYPES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_lib: Optional[ctypes.CDLL] = None


def _candidates() -> list[Path]:
    here = Path(__file__).resolve()
    found = []
    if os.environ.get("KCV_GDN_CUDA_LIB"):
        found.append(Path(os.environ["KCV_GDN_CUDA_LIB"]))
    found.append(here.parent.parent / "lib" / _LIB_NAME)
    repo = here.parents[3]
    found.extend(sorted(repo.glob(f"build*/out/lib/{_LIB_NAME}")))
    return found


def library() -> ctypes.CDLL:
    """The loaded CUDA library; raises RuntimeError naming the places searched."""
    global _lib
    if _lib is None:
        tried = _candidates()
        for path in tried:
            if path.is_file():
                lib = ctypes.CDLL(str(path))
                lib.kcv_gdn_workspace_bytes.restype = ctypes.c_size_t
                lib.kcv_gdn_workspace_bytes.argtypes = [ctypes.POINTER(Params), ctypes.c_int]
                lib.kcv_gdn_prepared_bytes.restype = ctypes.c_size_t
                lib.kcv_gdn_prepared_bytes.argtypes = [ctypes.POINTER(Params)]
                lib.kcv_gdn_forward.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p]
                lib.kcv_gdn_backward.argtypes = [ctypes.POINTER(Params), ctypes.c_void_p]
                lib.kcv_gdn_last_error.restype = ctypes.c_char_p
                _lib = lib
                break
        else:
            raise RuntimeError(
                f"{_LIB_NAME} not found (searched: {', '.join(str(p) for p in tried)}); build the project with "
                "KCV_CUDA=ON or set KCV_GDN_CUDA_LIB"
            )
    return _lib


def available() -> bool:
    try:
        library()
        return True
    except (RuntimeError, OSError):
        return False


def _ptr(t: Optional[torch.Tensor]) -> Optional[int]:
    return None if t is None or t.numel() == 0 else t.data_ptr()


def check_cu_seqlens(cu_seqlens: torch.Tensor, B: int, device: torch.device) -> None:
    """What the kernels need of cu_seqlens that the host knows without reading it: B = 1, a 1-D
    contiguous int64 tensor of at least two offsets on the inputs' device. Its values stay on the
    device (reading them would synchronise); the caller promises 0 = cu[0] <= ... <= cu[N] = T."""
    if B != 1:
        raise ValueError(f"cu_seqlens needs B = 1, got B = {B}")
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(f"cu_seqlens must be 1-D with at least two offsets, got shape {list(cu_seqlens.shape)}")
    if cu_seqlens.dtype != torch.int64:
        raise ValueError(f"cu_seqlens must be int64 (the kernels read 64-bit offsets), got {cu_seqlens.dtype}")
    if cu_seqlens.device != device:
        raise ValueError(f"cu_seqlens is on {cu_seqlens.device}, the inputs on {device}")
    if not cu_seqlens.is_contiguous():
        raise ValueError("cu_seqlens must be contiguous")


def make_params(q, k, v, g, beta, h0, cu_seqlens, gate: int, delta: bool, scale: float) -> Params:
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    if cu_seqlens is not None:
        check_cu_seqlens(cu_seqlens, B, q.device)
    p = Params()
    p.gate, p.delta, p.dtype = gate, int(delta), _DTYPES[q.dtype]
    p.B, p.T, p.H, p.HV, p.K, p.V = B, T, H, HV, K, V
    # N from the tensor's length, a host-side shape: no device-to-host copy of the offsets.
    p.N = cu_seqlens.numel() - 1 if cu_seqlens is not None else B
    p.cu_seqlens = _ptr(cu_seqlens)
    p.scale = scale
    p.q, p.k, p.v, p.g, p.beta, p.h0 = _ptr(q), _ptr(k), _ptr(v), _ptr(g), _ptr(beta), _ptr(h0)
    return p


def prepared_bytes(B: int, T: int, H: int, HV: int, K: int, V: int, N: Optional[int], gate: int, delta: bool) -> int:
    """Bytes of the chunk preparation a forward keeps for its backward (kcv_gdn_params.prepared),
    from the shapes alone; N: the number of sequences with cu_seqlens, None without."""
    p = Params()
    p.gate, p.delta = gate, int(delta)
    p.B, p.T, p.H, p.HV, p.K, p.V = B, T, H, HV, K, V
    p.N = N if N is not None else B
    # The size depends on whether there are offsets, never on their values or their address.
    p.cu_seqlens = 1 if N is not None else None
    return library().kcv_gdn_prepared_bytes(ctypes.byref(p))


def run(p: Params, backward: bool, device: torch.device) -> None:
    """Allocates the workspace on `device` and runs on the current stream. Set p.prepared first
    where the chunk preparation is kept apart: the workspace is smaller then."""
    lib = library()
    nbytes = lib.kcv_gdn_workspace_bytes(ctypes.byref(p), int(backward))
    workspace = torch.empty(nbytes, dtype=torch.uint8, device=device)
    p.workspace, p.workspace_bytes = workspace.data_ptr(), nbytes
    stream = torch.cuda.current_stream(device).cuda_stream
    status = (lib.kcv_gdn_backward if backward else lib.kcv_gdn_forward)(ctypes.byref(p), ctypes.c_void_p(stream))
    if status != 0:
        raise RuntimeError(f"kcv gdn {'backward' if backward else 'forward'}: {lib.kcv_gdn_last_error().decode()}")
