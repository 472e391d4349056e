"""Digests of the recurrence kernels' outputs and gradients, for comparing two builds of the library.

Runs kcv's ops (the library that KCV_GDN_CUDA_LIB or the installed package names) forward and
backward on fixed inputs, every member at each shape, and prints one line per member and shape with
a SHA-256 of each output's bytes. Two builds that must give the same bits print the same lines:

    KCV_GDN_CUDA_LIB=old/libkcv_gdn_cuda.so python3 bench/gdn_digest.py > old.txt
    KCV_GDN_CUDA_LIB=new/libkcv_gdn_cuda.so python3 bench/gdn_digest.py > new.txt
    diff old.txt new.txt
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gdn_bench import import_gdn, kcv_function, make_inputs  # noqa: E402

# (B, T, H, HV): many heads (wide scan slices on an H200) and few, with a partial last chunk.
SHAPES = [(4, 1000, 32, 32), (1, 500, 2, 4)]


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", default="gdn,kda,gla,ssd,la")
    args = parser.parse_args()
    gdn = import_gdn()   # the installed package, or the ops from the source tree

    for B, T, H, HV in SHAPES:
        for member in args.members.split(","):
            inputs = make_inputs(member, B, T, H, HV, seed=3)
            leaves = [None if x is None else x.detach().requires_grad_(True) for x in inputs]
            o = kcv_function(member, gdn)(*leaves)
            do = torch.randn(o.shape, generator=torch.Generator(device=o.device).manual_seed(4), device=o.device)
            o.backward(do.to(o.dtype))
            parts = [f"o={digest(o)}"]
            for name, leaf in zip(("dq", "dk", "dv", "dg", "dbeta"), leaves):
                if leaf is not None and leaf.grad is not None:
                    parts.append(f"{name}={digest(leaf.grad)}")
            print(f"{member} B{B} T{T} H{H} HV{HV}: " + " ".join(parts), flush=True)


if __name__ == "__main__":
    main()
