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

}  // namespace ember
