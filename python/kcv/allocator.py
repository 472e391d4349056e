"""Poisoned and guarded memory for the buffers a Python candidate allocates itself.

On a GPU, kcv installs its guarded allocator (``libkcv_guarded_alloc.so``, C++) as PyTorch's CUDA
allocator through ``torch.cuda.memory.CUDAPluggableAllocator``: every block sits between 4 KiB
guard bands, a fresh block holds the probe's output poison, and a freed block is poisoned and
quarantined. It must be installed before the process's first CUDA allocation, so the worker
does it at start.

On the CPU there is no pluggable allocator; before a call, kcv frees blocks of the outputs' sizes
filled with the call's poison, so that an allocator handing out recently freed memory (glibc
does, for blocks below its mmap threshold) gives the candidate poisoned rather than stale
memory. That is best effort; the inputs, which kcv allocates itself, are guarded exactly.
"""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import torch

LIBRARY_NAME = "libkcv_guarded_alloc.so"


def library_path() -> Path | None:
    """The installed guarded allocator, or None where it was not built (no CUDA toolkit)."""
    env = os.environ.get("KCV_GUARDED_ALLOC")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parent / LIBRARY_NAME)
    for c in candidates:
        if c.is_file():
            return c
    return None


class GuardedCudaAllocator:
    """The C API of libkcv_guarded_alloc, once it is PyTorch's allocator."""

    def __init__(self, path: Path):
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.kcv_ga_set_poison.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint64]
        self.lib.kcv_ga_check.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self.lib.kcv_ga_check.restype = ctypes.c_size_t
        self.lib.kcv_ga_blocks.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        self.lib.kcv_ga_blocks.restype = ctypes.c_size_t
        self.lib.kcv_ga_repoison.argtypes = [ctypes.c_uint64, ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_void_p]
        self.lib.kcv_ga_repoison_guards.argtypes = [ctypes.c_void_p]
        self.lib.kcv_ga_allocations.restype = ctypes.c_uint64

    def _text(self, fn, *args) -> str:
        need = fn(*args, None, 0)
        buf = ctypes.create_string_buffer(need + 1)
        fn(*args, buf, need + 1)
        return buf.value.decode()

    def set_poison(self, which: str, poison: dict) -> None:
        kind, byte, seed = (1, 0, int(poison["random"])) if "random" in poison else (0, int(poison.get("byte", 0xA5)), 0)
        if self.lib.kcv_ga_set_poison(which.encode(), kind, byte, seed) != 0:
            raise ValueError(f"unknown poison target {which!r}")

    def check(self) -> list[dict]:
        return json.loads(self._text(self.lib.kcv_ga_check))

    def blocks(self, with_freed: bool = False) -> list[dict]:
        return json.loads(self._text(self.lib.kcv_ga_blocks, int(with_freed)))

    def repoison_guards(self) -> None:
        self.lib.kcv_ga_repoison_guards(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))

    def allocations(self) -> int:
        return int(self.lib.kcv_ga_allocations())


_installed: GuardedCudaAllocator | None = None


def install_cuda_allocator() -> GuardedCudaAllocator | None:
    """Makes the guarded allocator PyTorch's CUDA allocator. Call before any CUDA allocation.

    Returns None (and PyTorch keeps its own allocator) where the library was not built.
    """
    global _installed
    if _installed is not None:
        return _installed
    path = library_path()
    if path is None:
        return None
    alloc = torch.cuda.memory.CUDAPluggableAllocator(str(path), "kcv_guarded_malloc", "kcv_guarded_free")
    torch.cuda.memory.change_current_allocator(alloc)
    _installed = GuardedCudaAllocator(path)
    return _installed


def installed() -> GuardedCudaAllocator | None:
    return _installed


def describe_damage(damage: list[dict], names: dict[int, str]) -> list[str]:
    """One line per damaged band, naming the tensor where the block is a known one."""
    lines = []
    for d in damage:
        block = d["block"]
        who = names.get(block["data"], f"block #{block['serial']} ({block['bytes']} bytes)")
        where = {"before": "band before", "after": "band after", "freed-data": "data of the freed block"}[d["where"]]
        lines.append(f"{who}: {where}, first changed byte at +{d['first_offset']}, {d['bytes_changed']} bytes changed")
    return lines


def groom_host_heap(nbytes: list[int], poison: dict) -> None:
    """Frees poisoned blocks of these sizes so that the next allocations of them reuse poison."""
    held = []
    for n in nbytes:
        if n <= 0:
            continue
        block = torch.empty(n, dtype=torch.uint8)
        if "random" in poison:
            gen = torch.Generator().manual_seed(int(poison["random"]) & 0x7FFFFFFFFFFFFFFF)
            block.copy_(torch.randint(0, 256, (n,), dtype=torch.uint8, generator=gen))
        else:
            block.fill_(int(poison.get("byte", 0xFF)))
        held.append(block)
    del held
