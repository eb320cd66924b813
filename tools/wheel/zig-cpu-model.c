/*
 * zig-cpu-model.c - __builtin_cpu_supports() for code compiled by zig cc.
 *
 * clang compiles __builtin_cpu_supports("avx2") into a read of __cpu_model
 * (features 0-31) or __cpu_features2 (32 and up), which the compiler's runtime
 * fills from CPUID in a constructor, __cpu_indicator_init (libgcc and LLVM's
 * compiler-rt do). Zig's compiler_rt (0.17) has only a stub that fills nothing
 * ("a conservative stub for now", lib/compiler_rt/fmv.zig), so every feature
 * reads as absent: ringd's codec would run its scalar kernels on every CPU, and
 * ring-launch would take any CPU for one without AVX. tools/wheel/wheel-deps.sh builds
 * this file into libzig_cpu_model.a and tools/wheel/build-wheels.sh links it into the
 * manylinux_2_28 wheel's extension and programs (LDFLAGS); its definitions take
 * the place of the stub's. The bits are LLVM's (X86TargetParser.def, the order
 * libgcc shares); tools/wheel/wheel-deps.sh compares every one against gcc's libgcc
 * on the build machine. Only the features are filled: ringd does not call
 * __builtin_cpu_is, which would read the vendor, type and subtype.
 */
#include <cpuid.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* clang's layout of the two objects it reads */
struct cpu_model {
    unsigned int vendor, type, subtype;
    unsigned int features[1];
};
HIDDEN struct cpu_model __cpu_model;
HIDDEN unsigned int __cpu_features2[4];

enum {
    F_CMOV, F_MMX, F_POPCNT, F_SSE, F_SSE2, F_SSE3, F_SSSE3, F_SSE4_1, F_SSE4_2, F_AVX,
    F_AVX2, F_SSE4_A, F_FMA4, F_XOP, F_FMA, F_AVX512F, F_BMI, F_BMI2, F_AES, F_PCLMUL,
    F_AVX512VL, F_AVX512BW, F_AVX512DQ, F_AVX512CD, F_AVX512ER, F_AVX512PF, F_AVX512VBMI,
    F_AVX512IFMA, F_AVX5124VNNIW, F_AVX5124FMAPS, F_AVX512VPOPCNTDQ, F_AVX512VBMI2, F_GFNI,
    F_VPCLMULQDQ, F_AVX512VNNI, F_AVX512BITALG, F_AVX512BF16, F_AVX512VP2INTERSECT,
};

static void set(unsigned int f, int on)
{
    if (!on)
        return;
    if (f < 32)
        __cpu_model.features[0] |= 1u << f;
    else
        __cpu_features2[(f - 32) / 32] |= 1u << ((f - 32) % 32);
}

static unsigned int xcr0(void)
{
    unsigned int lo, hi;

    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return lo;
}

HIDDEN int __cpu_indicator_init(void) __attribute__((constructor(101)));
HIDDEN int __cpu_indicator_init(void)
{
    unsigned int max, a, b, c, d, b7 = 0, c7 = 0, d7 = 0, a71 = 0, ext = 0;
    int avx_os = 0, avx512_os = 0;

    if (__cpu_model.vendor != 0)
        return 0; /* done already */
    if (!__get_cpuid(0, &max, &b, &c, &d) || max < 1) {
        __cpu_model.vendor = 3; /* other */
        return -1;
    }
    /* "GenuineIntel", "AuthenticAMD": intel 1, amd 2, other 3 as in libgcc */
    __cpu_model.vendor = b == 0x756e6547 ? 1 : b == 0x68747541 ? 2 : 3;
    __cpuid(1, a, b, c, d);
    /* AVX state saved by the OS (XCR0: SSE and YMM; and opmask, ZMM_Hi256, Hi16_ZMM) */
    if (c & bit_OSXSAVE) {
        unsigned int x = xcr0();

        avx_os = (x & 0x6) == 0x6;
        avx512_os = avx_os && (x & 0xe0) == 0xe0;
    }
    set(F_CMOV, d & bit_CMOV), set(F_MMX, d & bit_MMX), set(F_SSE, d & bit_SSE);
    set(F_SSE2, d & bit_SSE2), set(F_SSE3, c & bit_SSE3), set(F_PCLMUL, c & bit_PCLMUL);
    set(F_SSSE3, c & bit_SSSE3), set(F_SSE4_1, c & bit_SSE4_1), set(F_SSE4_2, c & bit_SSE4_2);
    set(F_POPCNT, c & bit_POPCNT), set(F_AES, c & bit_AES);
    set(F_FMA, avx_os && (c & bit_FMA)), set(F_AVX, avx_os && (c & bit_AVX));
    if (max >= 7) {
        __cpuid_count(7, 0, a, b7, c7, d7);
        if (a >= 1)
            __cpuid_count(7, 1, a71, b, c, d);
    }
    set(F_BMI, b7 & bit_BMI), set(F_BMI2, b7 & bit_BMI2), set(F_AVX2, avx_os && (b7 & bit_AVX2));
    set(F_AVX512F, avx512_os && (b7 & bit_AVX512F));
    set(F_AVX512DQ, avx512_os && (b7 & bit_AVX512DQ));
    set(F_AVX512IFMA, avx512_os && (b7 & bit_AVX512IFMA));
    set(F_AVX512PF, avx512_os && (b7 & bit_AVX512PF));
    set(F_AVX512ER, avx512_os && (b7 & bit_AVX512ER));
    set(F_AVX512CD, avx512_os && (b7 & bit_AVX512CD));
    set(F_AVX512BW, avx512_os && (b7 & bit_AVX512BW));
    set(F_AVX512VL, avx512_os && (b7 & bit_AVX512VL));
    set(F_AVX512VBMI, avx512_os && (c7 & bit_AVX512VBMI));
    set(F_AVX512VBMI2, avx512_os && (c7 & bit_AVX512VBMI2));
    set(F_GFNI, c7 & bit_GFNI), set(F_VPCLMULQDQ, avx_os && (c7 & bit_VPCLMULQDQ));
    set(F_AVX512VNNI, avx512_os && (c7 & bit_AVX512VNNI));
    set(F_AVX512BITALG, avx512_os && (c7 & bit_AVX512BITALG));
    set(F_AVX512VPOPCNTDQ, avx512_os && (c7 & bit_AVX512VPOPCNTDQ));
    set(F_AVX5124VNNIW, avx512_os && (d7 & bit_AVX5124VNNIW));
    set(F_AVX5124FMAPS, avx512_os && (d7 & bit_AVX5124FMAPS));
    set(F_AVX512VP2INTERSECT, avx512_os && (d7 & bit_AVX512VP2INTERSECT));
    set(F_AVX512BF16, avx512_os && (a71 & bit_AVX512BF16));
    __cpuid(0x80000000, ext, b, c, d);
    if (ext >= 0x80000001) {
        __cpuid(0x80000001, a, b, c, d);
        set(F_SSE4_A, c & bit_SSE4a), set(F_XOP, avx_os && (c & bit_XOP));
        set(F_FMA4, avx_os && (c & bit_FMA4));
    }
    return 0;
}
