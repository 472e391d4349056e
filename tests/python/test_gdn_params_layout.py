"""The ctypes mirror of kcv_gdn_params (kcv.gdn._library.Params) against the C header it mirrors.

The library reads every field at the header's offsets, so a field added to one side only would
make it read past Python's struct or misread the fields after it. This needs neither a GPU nor
the library: the header's declarations are read as text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the binding module imports it

import ctypes  # noqa: E402

from kcv.gdn import _library  # noqa: E402

HEADER = Path(__file__).resolve().parents[2] / "gdn" / "cuda" / "gdn_cuda.h"
C_TYPES = {
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "float": ctypes.c_float,
    "size_t": ctypes.c_size_t,
}


def header_fields() -> list[tuple[str, object]]:
    text = HEADER.read_text()
    body = re.search(r"typedef struct kcv_gdn_params \{(.*?)\} kcv_gdn_params;", text, re.S)
    assert body, f"no kcv_gdn_params in {HEADER}"
    code = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    fields = []
    for decl in (d.strip() for d in code.split(";")):
        if not decl:
            continue
        m = re.fullmatch(r"(?:const\s+)?(\w+)\s*(\*?)\s*([\w\s,]+)", decl)
        assert m, f"unreadable declaration in {HEADER.name}: {decl!r}"
        base, pointer, names = m.groups()
        ctype = ctypes.c_void_p if pointer else C_TYPES[base]
        fields += [(name.strip(), ctype) for name in names.split(",")]
    return fields


def test_params_mirror_the_header_field_for_field():
    want = header_fields()
    got = list(_library.Params._fields_)
    assert [n for n, _ in got] == [n for n, _ in want]
    for (name, ctype), (_, header_type) in zip(got, want):
        assert ctype is header_type, f"{name}: {ctype.__name__} in Python, {header_type.__name__} in the header"


def test_the_header_reader_sees_every_kind_of_field():
    # The reader above must not pass by reading nothing: the header has fields of each kind.
    kinds = {ctype for _, ctype in header_fields()}
    assert kinds == {ctypes.c_int32, ctypes.c_int64, ctypes.c_float, ctypes.c_size_t, ctypes.c_void_p}
    names = [n for n, _ in header_fields()]
    assert names[0] == "gate" and "segment_chunks" in names and len(names) == len(set(names))
