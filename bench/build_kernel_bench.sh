#!/usr/bin/env bash
# Builds bench/kernel_bench.cpp against the kernel sources directly (no CMake target, so it never
# slows the normal build). Usage: bash bench/build_kernel_bench.sh [build-dir]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/ember-kernel-bench}"
mkdir -p "$out"
flags=(-std=c++20 -O3 -DNDEBUG -I"$root" -pthread -DEMBER_HAVE_X86_SIMD=1)
avx512=("$root"/core/kernels/x86_avx512/*.cpp)
[[ -e "${avx512[0]}" ]] && flags+=(-DEMBER_HAVE_X86_AVX512=1)
objs=()
for src in "$root"/core/kernels/*.cpp "$root"/core/kernels/generic/*.cpp "$root"/core/tensor/*.cpp \
           "$root"/bench/kernel_bench.cpp; do
  obj="$out/$(basename "${src%.cpp}").o"
  g++ "${flags[@]}" -c "$src" -o "$obj"
  objs+=("$obj")
done
for src in "$root"/core/kernels/x86/*.cpp; do
  obj="$out/x86_$(basename "${src%.cpp}").o"
  g++ "${flags[@]}" -mavx2 -mfma -mf16c -c "$src" -o "$obj"
  objs+=("$obj")
done
for src in "${avx512[@]}"; do
  [[ -e "$src" ]] || continue
  obj="$out/x86_avx512_$(basename "${src%.cpp}").o"
  g++ "${flags[@]}" -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx512dq -c "$src" -o "$obj"
  objs+=("$obj")
done
g++ "${objs[@]}" -pthread -o "$out/kernel_bench"
echo "$out/kernel_bench"
