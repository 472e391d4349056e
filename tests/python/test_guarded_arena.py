"""The guarded allocator's logic over host memory (the CUDA build runs the same code)."""

from __future__ import annotations

import ctypes
import json

import pytest

from kcv import _core


def arena(**kw):
    return _core.HostGuardedArena(**kw)


def blocks(a, with_freed=False):
    return json.loads(a.blocks(with_freed))


def damage(a):
    return json.loads(a.check())


def test_fresh_block_holds_the_fill_poison_between_intact_guards():
    a = arena(guard_bytes=64)
    a.set_poison("fill", '{"byte": 204}')
    p = a.allocate(100)
    assert p % 64 == 0
    assert a.peek(p, 100) == b"\xcc" * 100
    assert a.peek(p - 64, 64) == b"\xa5" * 64 and a.peek(p + 100, 64) == b"\xa5" * 64
    assert damage(a) == []
    (b,) = blocks(a)
    assert b == {"serial": 1, "data": p, "bytes": 100, "device": 0, "freed": False}


def test_writes_past_either_end_are_reported_with_offsets():
    a = arena(guard_bytes=64)
    p = a.allocate(10)
    a.poke(p, b"\x00" * 10)           # inside: fine
    assert damage(a) == []
    a.poke(p + 10 + 3, b"\x01\x02")   # 2 bytes, 3 past the end
    a.poke(p - 1, b"\x07")            # the last byte of the band before
    d = damage(a)
    assert [(x["where"], x["first_offset"], x["bytes_changed"]) for x in d] == [("before", 63, 1), ("after", 3, 2)]
    assert all(x["block"]["data"] == p for x in d)
    a.repoison_guards()
    assert damage(a) == []


def test_freed_blocks_are_poisoned_and_quarantined():
    a = arena(guard_bytes=64, quarantine_bytes=1 << 20)
    a.set_poison("freed", '{"byte": 219}')
    p = a.allocate(32)
    a.poke(p, b"result" * 5)
    a.release(p)
    assert blocks(a) == []
    (b,) = blocks(a, with_freed=True)
    assert b["freed"] and b["data"] == p
    assert a.peek(p, 32) == b"\xdb" * 32       # a stale reader sees poison, not the result
    a.poke(p + 4, b"\x00")                      # a write after free
    d = damage(a)
    assert [(x["where"], x["first_offset"]) for x in d] == [("freed-data", 4)]


def test_quarantine_releases_oldest_first_beyond_its_budget():
    a = arena(guard_bytes=16, quarantine_bytes=200)
    first, second = a.allocate(100), a.allocate(100)
    a.release(first)
    a.release(second)   # 2 * (100 + 32) > 200: the first one goes
    assert [b["data"] for b in blocks(a, True)] == [second]
    a.drain()
    assert blocks(a, True) == []


def test_random_poison_is_a_function_of_seed_and_offset():
    a = arena(guard_bytes=64)
    a.set_poison("fill", '{"random": 5}')
    p, q = a.allocate(256), a.allocate(256)
    assert a.peek(p, 256) == a.peek(q, 256)
    assert len(set(a.peek(p, 256))) > 64
    a.set_poison("fill", '{"random": 6}')
    r = a.allocate(256)
    assert a.peek(r, 256) != a.peek(p, 256)


def test_repoison_refills_a_live_block_only():
    a = arena()
    p = a.allocate(8)
    a.poke(p, b"\x01" * 8)
    assert a.repoison(p, '{"byte": 0}') and a.peek(p, 8) == b"\x00" * 8
    assert not a.repoison(p + 1, '{"byte": 0}')
    a.release(p)
    assert not a.repoison(p, '{"byte": 0}')


def test_serials_count_every_allocation_and_unknown_frees_are_ignored():
    a = arena()
    ps = [a.allocate(n) for n in (1, 2, 3)]
    a.release(12345)
    assert a.allocations() == 3 and [b["serial"] for b in blocks(a)] == [1, 2, 3]
    assert [b["bytes"] for b in blocks(a)] == [1, 2, 3] and [b["data"] for b in blocks(a)] == ps


def test_cuda_library_exports_its_api_when_built():
    from kcv import allocator

    path = allocator.library_path()
    if path is None:
        pytest.skip("libkcv_guarded_alloc.so is not installed beside kcv (it is built only where the CUDA toolkit is found)")
    lib = ctypes.CDLL(str(path))
    for name in ("kcv_guarded_malloc", "kcv_guarded_free", "kcv_ga_set_poison", "kcv_ga_check", "kcv_ga_blocks",
                 "kcv_ga_repoison", "kcv_ga_repoison_guards", "kcv_ga_drain", "kcv_ga_allocations"):
        assert hasattr(lib, name), name
    # Neither call touches the driver: they work on a machine without a GPU.
    lib.kcv_ga_set_poison.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint64]
    assert lib.kcv_ga_set_poison(b"bogus", 0, 0, 0) == -1
    assert lib.kcv_ga_set_poison(b"fill", 0, 0xAB, 0) == 0
    lib.kcv_ga_blocks.restype = ctypes.c_size_t
    buf = ctypes.create_string_buffer(16)
    assert lib.kcv_ga_blocks(0, buf, 16) == 2 and buf.value == b"[]"

