/*
 * fake_cuda_memory.c - the fake CUDA device's memory, copies and kernels
 * (kernels/cuda/ring_cuda.h on the CPU, see fake_cuda_device.h): device
 * allocations, blocking and asynchronous copies, page-locked host memory and
 * the codec kernels, checked and queued on fake_cuda_device.c's streams
 * (fake_cuda_int.h).
 */
#include "ring_build.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fake_cuda_device.h"
#include "fake_cuda_int.h"
#include "half.h"

/* ---- ring_cuda.h: the device, memory, blocking copies ------------------------------- */

int ring_cuda_built(void)
{
    return 1;
}

int ring_cuda_available(void)
{
    return fake_cuda_knobs.available && fcd_dev_base != NULL;
}

int ring_cuda_is_device_ptr(const void *p)
{
    return fcd_in_dev(p);
}

int ring_cuda_ptr_device(const void *p)
{
    return fcd_in_dev(p) ? (int)((size_t)((const char *)p - fcd_dev_base) / DEV_SPAN) : -1;
}

int ring_cuda_set_device(int device)
{
    if (!ring_cuda_available() || device < 0 || device >= NDEV)
        return -1;
    fcd_cur_device = device;
    return 0;
}

int ring_cuda_malloc(size_t bytes, void **dev_p)
{
    size_t span = (bytes + PAGE - 1) / PAGE * PAGE + PAGE; /* a guard page after each */
    int d = fcd_cur_device;
    void *p;

    BEGIN(dev_p != NULL);
    if (fcd_dev_next[d] + span > DEV_SPAN)
        return fcd_leave(-1);
    p = fcd_dev_base + (size_t)d * DEV_SPAN + fcd_dev_next[d];
    fcd_dev_next[d] += span;
    VEC_PUSH(fcd_allocs, ((range_t){p, bytes, 1}));
    *dev_p = p;
    return fcd_leave(0);
}

int ring_cuda_free(void *dev_p)
{
    if (!ring_cuda_available())
        return -1;
    if (dev_p == NULL)
        return 0;
    fcd_enter();
    for (size_t i = 0; i < fcd_allocs.n; i++) {
        range_t *a = &fcd_allocs.v[i];
        if (a->live && a->p == dev_p) {
            fcd_run_all(); /* cudaFree waits for the device */
            a->live = 0; /* never handed out again: a later use is caught */
            madvise(a->p, (a->bytes + PAGE - 1) / PAGE * PAGE, MADV_DONTNEED);
            return fcd_leave(0);
        }
    }
    fcd_bug("ring_cuda_free: %p is not a live device allocation", dev_p);
    return fcd_leave(-1);
}

int ring_cuda_dmabuf_fd(const void *dev_ptr, size_t bytes, int *fd, uintptr_t *base, size_t *len)
{
    (void)dev_ptr, (void)bytes, (void)fd, (void)base, (void)len;
    return -1; /* no GPUDirect: registration falls back as without a driver */
}

/* cudaMemcpy: on the legacy default stream, which it waits for */
static int blocking_copy(int dir, void *dst, const void *src, size_t bytes)
{
    const char *what = dir == D2H ? "ring_cuda_memcpy_d2h" : "ring_cuda_memcpy_h2d";

    if (!ring_cuda_available())
        return -1;
    if (bytes == 0)
        return 0;
    fcd_enter();
    if (fcd_fault(dir == D2H ? &fake_cuda_knobs.fail_d2h : &fake_cuda_knobs.fail_h2d))
        return fcd_leave(-1);
    fcd_check_dev(dir == D2H ? src : dst, bytes, what);
    fcd_check_host(dir == D2H ? dst : src, bytes, what);
    fake_cuda_counts.blocking_calls++;
    fcd_legacy.host_waits++;
    fcd_run_stream(&fcd_legacy, NONE);
    *(dir == D2H ? &fake_cuda_counts.d2h_copies : &fake_cuda_counts.h2d_copies) += 1;
    *(dir == D2H ? &fake_cuda_counts.d2h_bytes : &fake_cuda_counts.h2d_bytes) += bytes;
    fcd_dev_open();
    memmove(dst, src, bytes);
    fcd_dev_close();
    return fcd_leave(0);
}

int ring_cuda_memcpy_d2h(void *dst, const void *dev_src, size_t bytes)
{
    return blocking_copy(D2H, dst, dev_src, bytes);
}

int ring_cuda_memcpy_h2d(void *dev_dst, const void *src, size_t bytes)
{
    return blocking_copy(H2D, dev_dst, src, bytes);
}
/* ---- asynchronous copies and page-locked memory ------------------------------------- */

static int async_copy(int dir, void *dst, const void *src, size_t bytes, void *stream)
{
    static const char *const what[] = {"ring_cuda_memcpy_d2h_async", "ring_cuda_memcpy_h2d_async",
                                       "ring_cuda_memcpy_d2d_async"};
    fstream_t *s;
    const void *host = dir == D2H ? dst : src;

    if (!ring_cuda_available())
        return -1;
    if (bytes == 0)
        return 0;
    fcd_enter();
    s = fcd_get_stream(stream, what[dir]);
    if ((dir == D2H && fcd_fault(&fake_cuda_knobs.fail_d2h)) ||
        (dir == H2D && fcd_fault(&fake_cuda_knobs.fail_h2d)))
        return fcd_leave(-1);
    if (dir != D2H)
        fcd_check_dev(dst, bytes, what[dir]);
    if (dir != H2D)
        fcd_check_dev(src, bytes, what[dir]);
    if (dir != D2D) {
        fcd_check_host(host, bytes, what[dir]);
        fake_cuda_counts.unpinned_async += fcd_registered(host, bytes) == NULL;
    }
    if (dir == D2H)
        fake_cuda_counts.d2h_copies++, fake_cuda_counts.d2h_bytes += bytes;
    else if (dir == H2D)
        fake_cuda_counts.h2d_copies++, fake_cuda_counts.h2d_bytes += bytes;
    else
        fake_cuda_counts.d2d_bytes += bytes;
    fcd_push(s, &(op_t){.kind = OP_COPY, .dir = dir, .dst = dst, .src = src, .n = bytes});
    return fcd_leave(0);
}

int ring_cuda_memcpy_d2h_async(void *dst, const void *dev_src, size_t bytes, void *stream)
{
    return async_copy(D2H, dst, dev_src, bytes, stream);
}

int ring_cuda_memcpy_h2d_async(void *dev_dst, const void *src, size_t bytes, void *stream)
{
    return async_copy(H2D, dev_dst, src, bytes, stream);
}

int ring_cuda_memcpy_d2d_async(void *dev_dst, const void *dev_src, size_t bytes, void *stream)
{
    return async_copy(D2D, dev_dst, dev_src, bytes, stream);
}

int ring_cuda_host_register(void *p, size_t bytes)
{
    BEGIN(p != NULL && bytes > 0);
    fcd_check_host(p, bytes, "ring_cuda_host_register");
    for (size_t i = 0; i < fcd_regs.n; i++)
        if ((char *)p < fcd_regs.v[i].p + fcd_regs.v[i].bytes &&
            fcd_regs.v[i].p < (char *)p + bytes) {
            fcd_bug("ring_cuda_host_register: [%p, +%zu) overlaps the registered [%p, +%zu)",
                    p, bytes, (void *)fcd_regs.v[i].p, fcd_regs.v[i].bytes);
            return fcd_leave(-1);
        }
    VEC_PUSH(fcd_regs, ((range_t){p, bytes, 1}));
    return fcd_leave(0);
}

/* 1 when an operation queued on s (not yet run) reads or writes host memory in r */
static int queued_on(const fstream_t *s, const range_t *r)
{
    for (size_t i = s->head; i < s->len; i++) {
        const op_t *o = &s->ops[i];
        const char *h = o->dir == D2H ? o->dst : o->src;
        if (o->kind == OP_COPY && o->dir != D2D && h < r->p + r->bytes && r->p < h + o->n)
            return 1;
    }
    return 0;
}

int ring_cuda_host_unregister(void *p)
{
    BEGIN(p != NULL);
    for (size_t i = 0; i < fcd_regs.n; i++) {
        if (fcd_regs.v[i].p != p)
            continue;
        int busy = queued_on(&fcd_legacy, &fcd_regs.v[i]);
        for (size_t j = 0; j < fcd_streams.n; j++)
            busy |= queued_on(fcd_streams.v[j], &fcd_regs.v[i]);
        if (busy)
            fcd_bug("ring_cuda_host_unregister: %p still has a queued copy (its event was "
                    "not waited for)", p);
        fcd_regs.v[i] = fcd_regs.v[--fcd_regs.n];
        return fcd_leave(0);
    }
    fcd_bug("ring_cuda_host_unregister: %p is not registered", p);
    return fcd_leave(-1);
}

/* ---- kernels ------------------------------------------------------------------------ */

static int launch(const char *what, void *stream, const op_t *o)
{
    fstream_t *s;

    if (!ring_cuda_available())
        return -1;
    if (o->n == 0)
        return 0;
    fcd_enter();
    s = fcd_get_stream(stream, what);
    if (fcd_fault(&fake_cuda_knobs.fail_kernel))
        return fcd_leave(-1);
    fcd_check_dev(o->dst, o->n * (o->kind == OP_DECODE ? 4 : 2), what);
    fcd_check_dev(o->src, o->n * (o->kind == OP_ENCODE ? 4 : 2), what);
    if (o->kind == OP_FUSED) {
        fcd_check_dev(o->src2, o->n * 4, what);
        if (o->dst2 != NULL)
            fcd_check_dev(o->dst2, o->n * 4, what);
    }
    fake_cuda_counts.kernels++;
    fcd_push(s, o);
    return fcd_leave(0);
}

/* the four conversions and the two fused steps share their shapes */
#define CONVERT(_name, _dst_t, _src_t, _kind, _bf16)                                          \
    int _name(_dst_t *dev_dst, const _src_t *dev_src, float scale, size_t n, void *stream)   \
    {                                                                                        \
        return launch(#_name, stream, &(op_t){.kind = _kind, .bf16 = _bf16, .dst = dev_dst,  \
                                              .src = dev_src, .s1 = scale, .n = n});         \
    }
CONVERT(ring_cuda_encode_f16, uint16_t, float, OP_ENCODE, 0)
CONVERT(ring_cuda_decode_f16, float, uint16_t, OP_DECODE, 0)
CONVERT(ring_cuda_encode_bf16, uint16_t, float, OP_ENCODE, 1)
CONVERT(ring_cuda_decode_bf16, float, uint16_t, OP_DECODE, 1)

#define FUSED(_name, _bf16)                                                                  \
    int _name(uint16_t *dev_out, float *dev_final, const uint16_t *dev_in,                 \
              const float *dev_local, float in_scale, float local_scale, float out_scale,  \
              size_t n, void *stream)                                                      \
    {                                                                                        \
        return launch(#_name, stream,                                                        \
                      &(op_t){.kind = OP_FUSED, .bf16 = _bf16, .dst = dev_out,               \
                              .dst2 = dev_final, .src = dev_in, .src2 = dev_local,           \
                              .s1 = in_scale, .s2 = local_scale, .s3 = out_scale, .n = n});  \
    }
FUSED(ring_cuda_fused_f16, 0)
FUSED(ring_cuda_fused_bf16, 1)

/* absmax of each range, as ring_absmax_elem folds it; blocking: the stream runs first */
static int absmax(const char *what, const float *src, const size_t *offs, const size_t *lens,
                  size_t nranges, float *max_out, int *nonfinite_out, void *stream)
{
    fstream_t *s;
    int rc;

    fcd_enter();
    s = fcd_get_stream(stream, what);
    if (fcd_fault(&fake_cuda_knobs.fail_kernel))
        return fcd_leave(-1);
    for (size_t r = 0; r < nranges; r++)
        if (lens[r] > 0)
            fcd_check_dev(src + offs[r], lens[r] * 4, what);
    fake_cuda_counts.kernels++;
    fake_cuda_counts.blocking_calls++;
    s->host_waits++;
    fcd_run_stream(s, NONE);
    if ((rc = fcd_stream_ok(s, NONE)) != 0)
        return fcd_leave(rc);
    fcd_dev_open();
    for (size_t r = 0; r < nranges; r++) {
        uint32_t bits = 0;
        int nonfinite = 0;
        for (size_t i = 0; i < lens[r]; i++)
            ring_absmax_elem(&bits, &nonfinite, src[offs[r] + i]);
        max_out[r] = ring_bits_f32(bits);
        nonfinite_out[r] = nonfinite;
    }
    fcd_dev_close();
    return fcd_leave(0);
}

int ring_cuda_absmax_f32(const float *dev_src, size_t n, float *max_p, int *nonfinite_p,
                         void *stream)
{
    size_t off = 0;
    int nonfinite = 0;

    if (max_p == NULL || !ring_cuda_available())
        return -1;
    if (n == 0) {
        *max_p = 0.0f;
        return 0;
    }
    if (absmax("ring_cuda_absmax_f32", dev_src, &off, &n, 1, max_p, &nonfinite, stream) != 0)
        return -1;
    if (nonfinite && nonfinite_p != NULL)
        *nonfinite_p = 1;
    return 0;
}

int ring_cuda_absmax_ranges(const float *dev_src, const size_t *offs, const size_t *lens,
                            size_t nranges, float *max_out, int *nonfinite_out, void *stream)
{
    if (!ring_cuda_available() ||
        (nranges > 0 && (offs == NULL || lens == NULL || max_out == NULL || nonfinite_out == NULL)))
        return -1;
    if (nranges == 0)
        return 0;
    return absmax("ring_cuda_absmax_ranges", dev_src, offs, lens, nranges, max_out,
                  nonfinite_out, stream);
}
