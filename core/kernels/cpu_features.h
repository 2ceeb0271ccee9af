#pragma once
// Run-time CPU checks that decide which kernel set may run.

namespace ember {

// True when the CPU (and OS) support AVX2, FMA and F16C: the x86/ kernels need all three.
bool cpu_has_avx2_fma_f16c();

// True when, in addition, the CPU has AVX-VNNI (256-bit vpdpbusd): the *_vnni kernels need it.
bool cpu_has_avx_vnni();

// True when, in addition to AVX2+FMA+F16C, the CPU has AVX-512 F, BW, VL, DQ and VNNI and the OS
// saves the ZMM state: the x86_avx512/ kernels need all of them.
bool cpu_has_avx512_vnni();

// aarch64 (all false on other architectures). Read from the kernel's hwcaps (getauxval), which
// Linux and Android fill from the ID registers, so the answer is the same under qemu-aarch64 -cpu X.
// Advanced SIMD (NEON): part of ARMv8.0, always present on aarch64.
bool cpu_has_neon();
// SDOT/UDOT (ARMv8.2 dot product, hwcap "asimddp"): the *_dotprod kernels need it.
bool cpu_has_dotprod();
// SMMLA/UMMLA (ARMv8.6 int8 matrix multiply, hwcap2 "i8mm"): the *_i8mm kernels need it.
bool cpu_has_i8mm();
// Half-precision vector arithmetic (ARMv8.2 FP16, hwcap "asimdhp"): the *_fp16 kernels need it.
bool cpu_has_fp16_arith();

}  // namespace ember
