#!/usr/bin/env bash
# The recurrence kernels' CUDA library and the GPU check program linked against it, built in DIR
# with the package's flags (those of gdn/CMakeLists.txt, KCV_GDN_CUDA_FLAGS) plus -O3 and line
# information, for sm_90a; extra nvcc flags go to the library (e.g. -Xptxas -v, or
# -DKCV_GDN_TF32_OPERANDS). Needs nvcc and g++, no GPU. The bench scripts that build call this.
#
#   bench/gdn_build.sh DIR [NVCC FLAGS...]      DIR/libkcv_gdn_cuda.so and DIR/check_gdn_cuda
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:?a directory}"
shift
mkdir -p "$dir"
arch=-gencode=arch=compute_90a,code=sm_90a
nvcc -std=c++20 -O3 "$arch" -fmad=false -lineinfo -Xcompiler -fPIC -shared "$@" gdn/cuda/gdn_api.cu \
    -o "$dir/libkcv_gdn_cuda.so" &
lib=$!
nvcc -std=c++20 -O2 "$arch" -c gdn/tests/check_gdn_cuda.cu -o "$dir/check.o"
g++ -std=c++20 -O2 -c gdn/problem.cpp -o "$dir/problem.o"
g++ -std=c++20 -O2 -c gdn/oracle/gdn_oracle.cpp -o "$dir/oracle.o"
wait "$lib"
nvcc "$arch" "$dir/check.o" "$dir/problem.o" "$dir/oracle.o" -L"$dir" -lkcv_gdn_cuda \
    -Xlinker -rpath,'$ORIGIN' -o "$dir/check_gdn_cuda"
rm -f "$dir/check.o" "$dir/problem.o" "$dir/oracle.o"
