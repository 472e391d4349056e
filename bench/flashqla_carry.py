"""FlashQLA for a GPU machine without network: pack its wheels here, install them there.

FlashQLA (PyPI flash-qla) is the fused Hopper backend that flash-linear-attention dispatches Gated
DeltaNet to when it is installed; bench/gdn_bench.py times it with --impls flashqla. It is pure
Python over TileLang, which compiles its kernels with the machine's own nvcc on the first call, so
nothing is downloaded at run time. The wheels are large (TileLang alone is about 50 MB, with AMD's
Composable Kernel sources inside), so `pack` drops what a CUDA machine never reads, rewrites each
wheel's RECORD to match, and stores the unpacked wheels as one xz tarball; `install` turns them
back into wheels and installs them with pip, offline.

    python3 bench/flashqla_carry.py pack [--dest .fqla]            # where PyPI is reachable
    python3 bench/flashqla_carry.py install --carry .fqla --target /tmp/fqla-site   # on the GPU machine

`install` uses --no-deps: TileLang's other requirements (torch, numpy, ml-dtypes, cloudpickle,
psutil, tqdm, typing-extensions) are in the GPU machine's image; torch-c-dlpack-ext is left out
(it has no build for torch 2.11, and tvm-ffi works without it). `import flash_qla` needs a GPU.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# name==version: the paths inside the wheel that a CUDA machine never reads.
PACKAGES = {
    "tilelang==0.1.12": ["tilelang/3rdparty/composable_kernel"],
    "apache-tvm-ffi==0.1.11": [],
    "z3-solver==4.15.4.0": ["z3_solver-4.15.4.0.data", "z3/include"],
}
FLASHQLA = "flash-qla==0.1.3"
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64"]
TARBALL = "fqla_wheels.tar.xz"


def record_line(root: Path, path: Path) -> str:
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path.relative_to(root).as_posix()},sha256={digest},{len(data)}"


def unpack_pruned(wheel: Path, dest: Path, drop: list[str]) -> Path:
    """wheel unpacked into dest/<wheel name>/ (file modes kept) without the paths in drop, and its
    RECORD rewritten to list what is left, with their hashes."""
    out = dest / wheel.name
    with zipfile.ZipFile(wheel) as z:
        z.extractall(out)
        for info in z.infolist():
            if mode := (info.external_attr >> 16) & 0o777:
                (out / info.filename).chmod(mode)
    for rel in drop:
        path = out / rel
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:
            raise SystemExit(f"{wheel.name}: no {rel} to drop (has the wheel's layout changed?)")
    (record,) = out.glob("*.dist-info/RECORD")
    files = sorted(p for p in out.rglob("*") if p.is_file() and p != record)
    record.write_text("\n".join([record_line(out, p) for p in files] + [f"{record.relative_to(out).as_posix()},,"])
                      + "\n")
    return out


def zip_wheel(folder: Path, target: Path) -> None:
    """An unpacked wheel folder back into a wheel (uncompressed: it is only read once, by pip),
    file modes kept, RECORD last."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    files.sort(key=lambda p: p.name == "RECORD" and p.parent.name.endswith(".dist-info"))
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as z:
        for p in files:
            z.write(p, p.relative_to(folder).as_posix())


def pack(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(tmp / "dl"),
                        *PACKAGES, FLASHQLA], check=True)
        staged = tmp / "unpacked"
        for spec, drop in PACKAGES.items():
            name, ver = spec.split("==")
            (wheel,) = (tmp / "dl").glob(f"{name.replace('-', '_')}-{ver}-*.whl")
            unpack_pruned(wheel, staged, drop)
        with tarfile.open(dest / TARBALL, "w:xz", preset=9) as tar:
            tar.add(staged, arcname="unpacked")
        for old in dest.glob("flash_qla-*.whl"):
            old.unlink()
        (wheel,) = (tmp / "dl").glob("flash_qla-*.whl")
        shutil.copy(wheel, dest / wheel.name)
    size = sum(p.stat().st_size for p in dest.iterdir() if p.is_file())
    print(f"{dest}: {size / 2**20:.1f} MiB to carry")


def install(carry: Path, target: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp) / "wheels"
        wheels.mkdir()
        with tarfile.open(carry / TARBALL) as tar:
            tar.extractall(tmp, filter="tar")
        for folder in sorted((Path(tmp) / "unpacked").iterdir()):
            zip_wheel(folder, wheels / folder.name)
        for wheel in carry.glob("flash_qla-*.whl"):
            shutil.copy(wheel, wheels / wheel.name)
        pip = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir", "--no-compile",
               "--disable-pip-version-check", "--find-links", str(wheels)]
        if target:
            pip += ["--target", str(target), "--upgrade"]
        subprocess.run(pip + [*PACKAGES, FLASHQLA], check=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="download, prune and pack the wheels (needs PyPI)")
    p.add_argument("--dest", type=Path, default=Path(".fqla"))
    i = sub.add_parser("install", help="install the packed wheels, offline")
    i.add_argument("--carry", type=Path, default=Path(".fqla"))
    i.add_argument("--target", type=Path, default=None, help="pip --target (then put it on PYTHONPATH)")
    args = parser.parse_args(argv)
    if args.command == "pack":
        pack(args.dest)
    else:
        if not (args.carry / TARBALL).exists():
            parser.error(f"{args.carry / TARBALL} not found: run 'pack' where PyPI is reachable and carry the folder")
        install(args.carry, args.target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
