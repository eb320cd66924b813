/*
 * blas_core.h - is OpenBLAS running the kernels this CPU can run?
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks its kernels by CPU model
 * number. A release older than the CPU does not know the model and falls back
 * to generic SSE3 code: Debian 12's 0.3.21 runs "Prescott" kernels on an
 * Emerald Rapids Xeon (family 6, model 207), whose sgemm is 4.8x slower there
 * than the Cooperlake kernels the same library ships (64x784x256, measured).
 * OPENBLAS_CORETYPE, read when the library loads, chooses the kernels instead.
 * These functions say which to choose; the callers (ring-launch, ringd) ask
 * OpenBLAS for its choice with openblas_get_corename().
 */
#ifndef RING_BLAS_CORE_H
#define RING_BLAS_CORE_H

/* The widest vector code the CPU and the OS (saved register state) both allow. */
typedef enum ring_cpu_level {
    RING_CPU_SSE,         /* nothing below */
    RING_CPU_AVX,         /* AVX without AVX2 and FMA */
    RING_CPU_AVX2,        /* AVX2 and FMA */
    RING_CPU_AVX512,      /* AVX-512 F, CD, BW, DQ and VL: OpenBLAS's SkylakeX */
    RING_CPU_AVX512_BF16, /* and AVX512_BF16: OpenBLAS's Cooperlake */
} ring_cpu_level_t;

/* This CPU's level (cpuid and xgetbv, through the compiler's builtins). */
ring_cpu_level_t ring_cpu_level_detect(void);

/* "AVX-512 with BF16", "AVX2", ...: for messages. */
const char *ring_cpu_level_name(ring_cpu_level_t level);

/*
 * The OPENBLAS_CORETYPE to set when OpenBLAS chose corename on a CPU of this
 * level, or NULL when its choice is fine. Advice is given only when corename is
 * one of OpenBLAS's pre-AVX kernel sets (Prescott, Core2, Nehalem, ...: what it
 * falls back to) and the CPU has AVX2 or more; an unknown name (a newer
 * OpenBLAS) gets none. Case does not matter.
 */
const char *ring_blas_coretype_advice(const char *corename, ring_cpu_level_t level);

#endif
