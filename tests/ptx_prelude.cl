/* The OpenCL built-ins the tensor-core kernels call, for assembling clang's
 * PTX with ptxas (ptx_check.cmake with -DPTXAS=): clang's nvcl target
 * leaves them external (NVIDIA's driver supplies them). Only their
 * register use matters here, not their speed. */
size_t __attribute__((overloadable)) get_group_id(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_ctaid_x() : d == 1 ? __nvvm_read_ptx_sreg_ctaid_y() : __nvvm_read_ptx_sreg_ctaid_z(); }
size_t __attribute__((overloadable)) get_local_id(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_tid_x() : d == 1 ? __nvvm_read_ptx_sreg_tid_y() : __nvvm_read_ptx_sreg_tid_z(); }
size_t __attribute__((overloadable)) get_num_groups(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_nctaid_x() : d == 1 ? __nvvm_read_ptx_sreg_nctaid_y() : __nvvm_read_ptx_sreg_nctaid_z(); }
size_t __attribute__((overloadable)) get_local_size(uint d) { return d == 0 ? __nvvm_read_ptx_sreg_ntid_x() : d == 1 ? __nvvm_read_ptx_sreg_ntid_y() : __nvvm_read_ptx_sreg_ntid_z(); }
int __attribute__((overloadable)) any(short8 x) { return (x.s0 | x.s1 | x.s2 | x.s3 | x.s4 | x.s5 | x.s6 | x.s7) < 0; }
int __attribute__((overloadable)) any(int4 x) { return (x.s0 | x.s1 | x.s2 | x.s3) < 0; }
uint __attribute__((overloadable)) clz(uint x) { return __builtin_clz(x); }
float __attribute__((overloadable)) log(float x) { float r; __asm__("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x)); return r * 0.693147f; }
int __attribute__((overloadable)) max(int a, int b) { return a > b ? a : b; }
int __attribute__((overloadable)) min(int a, int b) { return a < b ? a : b; }
float __attribute__((overloadable)) fmax(float a, float b) { return __builtin_fmaxf(a, b); }
int __attribute__((overloadable)) isfinite(float x) { return __builtin_isfinite(x); }
uint __attribute__((overloadable)) atomic_or(volatile __local uint *p, uint v) { uint r; __asm__ volatile("atom.shared.or.b32 %0, [%1], %2;" : "=r"(r) : "r"((uint)(ulong)p), "r"(v) : "memory"); return r; }
int __attribute__((overloadable)) atomic_inc(volatile __global int *p) { int r; __asm__ volatile("atom.global.add.u32 %0, [%1], 1;" : "=r"(r) : "l"(p) : "memory"); return r; }
void __attribute__((overloadable)) barrier(cl_mem_fence_flags f) { __syncthreads(); }
void __attribute__((overloadable)) vstore_half_rte(float x, size_t i, __global half *p) { ushort h; __asm__("{ .reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(x)); ((__global ushort *)p)[i] = h; }
void __attribute__((overloadable)) vstore_half_rte(float x, size_t i, __local half *p) { ushort h; __asm__("{ .reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(x)); ((__local ushort *)p)[i] = h; }
void __attribute__((overloadable)) vstore_half_rte(float x, size_t i, __private half *p) { ushort h; __asm__("{ .reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t; }" : "=h"(h) : "f"(x)); ((__private ushort *)p)[i] = h; }
float __attribute__((overloadable)) tanh(float x) { float r; __asm__("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
uint __attribute__((overloadable)) abs(int x) { return x < 0 ? -x : x; }
int __attribute__((overloadable)) isnan(float x) { return __builtin_isnan(x); }
int __attribute__((overloadable)) isinf(float x) { return __builtin_isinf(x); }
float __attribute__((overloadable)) fmin(float a, float b) { return __builtin_fminf(a, b); }
float __attribute__((overloadable)) exp2(float x) { float r; __asm__("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
float __attribute__((overloadable)) exp(float x) { return exp2(x * 1.44269504f); }
float __attribute__((overloadable)) fabs(float x) { return __builtin_fabsf(x); }
float __attribute__((overloadable)) sqrt(float x) { return __builtin_sqrtf(x); }
float2 __attribute__((overloadable)) vload2(size_t i, const __local float *p) { return *(const __local float2 *)(p + 2 * i); }
float2 __attribute__((overloadable)) vload2(size_t i, const __global float *p) { return (float2)(p[2 * i], p[2 * i + 1]); }
float4 __attribute__((overloadable)) vload4(size_t i, const __global float *p) { return (float4)(p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]); }
float __attribute__((overloadable)) fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
int __attribute__((overloadable)) clamp(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }
size_t __attribute__((overloadable)) get_global_id(uint d) { return get_group_id(d) * (d == 0 ? __nvvm_read_ptx_sreg_ntid_x() : d == 1 ? __nvvm_read_ptx_sreg_ntid_y() : __nvvm_read_ptx_sreg_ntid_z()) + get_local_id(d); }
float __attribute__((overloadable)) log2(float x) { float r; __asm__("lg2.approx.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
float __attribute__((overloadable)) vload_half(size_t i, const __global half *p) { float r; __asm__("{ .reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t; }" : "=f"(r) : "h"(((const __global ushort *)p)[i])); return r; }
ushort4 __attribute__((overloadable)) vload4(size_t i, const __global ushort *p) { return (ushort4)(p[4 * i], p[4 * i + 1], p[4 * i + 2], p[4 * i + 3]); }
ushort2 __attribute__((overloadable)) vload2(size_t i, const __global ushort *p) { return (ushort2)(p[2 * i], p[2 * i + 1]); }
int __attribute__((overloadable)) atomic_xchg(volatile __global int *p, int v) { int r; __asm__ volatile("atom.global.exch.b32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory"); return r; }
int __attribute__((overloadable)) atomic_or(volatile __global int *p, int v) { int r; __asm__ volatile("atom.global.or.b32 %0, [%1], %2;" : "=r"(r) : "l"(p), "r"(v) : "memory"); return r; }
float __attribute__((overloadable)) round(float x) { return __builtin_roundf(x); }
float __attribute__((overloadable)) rint(float x) { return __builtin_rintf(x); }
float __attribute__((overloadable)) nextafter(float x, float y) { int i = as_int(x); return x == y ? y : as_float(x == 0.0f ? (y > 0.0f ? 1 : (int)0x80000001) : (x < y) == (x > 0.0f) ? i + 1 : i - 1); }
void __attribute__((overloadable)) vstore_half_rte(float x, size_t i, __global ushort *p) { vstore_half_rte(x, i, (__global half *)p); }
void __attribute__((overloadable)) mem_fence(cl_mem_fence_flags f) { __asm__ volatile("membar.cta;" ::: "memory"); }
uint __attribute__((overloadable)) mul_hi(uint a, uint b) { return __nvvm_mulhi_ui(a, b); }
