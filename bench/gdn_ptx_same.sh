#!/usr/bin/env bash
# Whether the recurrence kernels' GPU code is unchanged by a change to their source, without a GPU:
# the PTX of every kernel of gdn/cuda/gdn_api.cu, compiled with the library's flags at revision REV
# (a git worktree) and from the working tree, compared kernel by kernel with the basic blocks'
# label numbers and the virtual registers' numbers taken out (both follow from the order in which
# the compiler met them, nothing else). Equal PTX becomes equal machine code under the same ptxas,
# so a kernel listed as the same computes the same bits as at REV. A kernel whose template gained a
# defaulted parameter is matched under its old name when NEW_PARAM (a mangled fragment such as
# Lb0E) removed from the new name gives the old one.
#
#   bench/gdn_ptx_same.sh REV [NEW_PARAM]      exit status 0 only if every kernel of REV is the same
#
# Needs nvcc and git; about two minutes per compilation on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
rev="${1:?a git revision}" new_param="${2:-}"
work=$(mktemp -d)
trap 'git worktree remove --force "$work/rev" > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/rev" "$rev"
flags=(-std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -fmad=false -ptx)
(cd "$work/rev" && nvcc "${flags[@]}" gdn/cuda/gdn_api.cu -o "$work/rev.ptx") &
nvcc "${flags[@]}" gdn/cuda/gdn_api.cu -o "$work/now.ptx"
wait $!
python3 - "$work/rev.ptx" "$work/now.ptx" "$new_param" <<'PY'
import re, sys

def kernels(path):
    text = open(path).read()
    return {m.group(1): m.group(0) for m in re.finditer(r"\.visible \.entry (\S+)\(.*?\n\}\n", text, re.S)}

def canonical(name, body):
    body = body.replace(name, "KERNEL")
    body = re.sub(r"\$L__BB\d+_", "$L__BB_", body)
    seen = {}
    def rename(m):
        return seen.setdefault(m.group(0), f"%{m.group(1)}#{len(seen)}")
    return re.sub(r"%(rd|rs|r|fd|f|p|hh|h)(\d+)", rename, body)

old, new, param = kernels(sys.argv[1]), kernels(sys.argv[2]), sys.argv[3]
renamed = {n.replace(param, "", 1) if param else n: n for n in new}
same, differ, missing = [], [], []
matched = set()
for name, body in old.items():
    now_name = name if name in new else renamed.get(name)
    if now_name is None:
        missing.append(name)
        continue
    matched.add(now_name)
    (same if canonical(name, body) == canonical(now_name, new[now_name]) else differ).append(name)
added = [n for n in new if n not in matched]
print(f"kernels at the revision: {len(old)}; the same: {len(same)}; different: {len(differ)}; gone: {len(missing)}; "
      f"new in the working tree: {len(added)}")
for n in differ:
    print("  different:", n)
for n in missing:
    print("  gone:", n)
sys.exit(0 if not differ and not missing else 1)
PY
