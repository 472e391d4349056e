"""The ``kcv`` console script: runs the native command installed inside this package."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    here = Path(__file__).resolve().parent
    binary = here / "bin" / "kcv"
    if not binary.exists():
        sys.exit(f"kcv: the native command is missing from the installation ({binary})")
    os.environ.setdefault("KCV_KERNEL_DIR", str(here / "kernels"))
    os.execv(str(binary), [str(binary), *sys.argv[1:]])


if __name__ == "__main__":
    main()
