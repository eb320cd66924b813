/*
 * t-cuda-driver.c - how a CUDA build of libringd tells device from host
 * buffers (kernels/cuda/codec.cu, ring_cuda_is_device_ptr), on any machine:
 * a stand-in driver (tests/support/fake_libcuda.c, built as tests/unit/.libs/libcuda.so.1)
 * answers for the address ranges this program names.
 *
 *   - Before any libcuda is in the process, no buffer is device memory and
 *     asking loads none (host buffers never initialise CUDA).
 *   - With the stand-in loaded: what it calls device memory is device
 *     memory; managed memory and memory it does not know (host) are not.
 *   - An allreduce whose buffer the driver calls device memory takes the
 *     device path: here, where the CUDA runtime finds no usable driver, it
 *     fails with RING_ERR_IO naming the device buffer, and does not read the
 *     buffer as host memory. (In a child: the runtime then loads the
 *     stand-in as its driver.)
 *   - A driver error (unknown memory is none: the driver answers zeroes)
 *     leaves the answer to the runtime, which here finds no device: 0 (in a
 *     child, likewise).
 *
 * Skipped in builds without CUDA (the stub answers 0 to everything).
 */
#include "ring_build.h"

#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ringd/ringd.h>

#include "cuda/ring_cuda.h"
#include "tap.h"

enum { FAKE_DEVICE, FAKE_MANAGED, FAKE_ERROR };
#define COUNT 1024

static int libcuda_mapped(void)
{
    char line[1024];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");

    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        found |= strstr(line, "libcuda.so") != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

/* Run fn in a child (the CUDA runtime may load the stand-in as its driver
 * there); its exit code, or -1 if it did not exit. */
static int in_child(int (*fn)(void *), void *arg)
{
    int wstatus;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid < 0)
        bail("fork: %m");
    if (pid == 0) {
        int rc;
        alarm(60);
        rc = fn(arg);
        fflush(stdout);
        _exit(rc);
    }
    if (waitpid(pid, &wstatus, 0) != pid)
        bail("waitpid: %m");
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
}

/* exit 0: the allreduce of the "device" buffer failed with RING_ERR_IO naming it */
static int allreduce_device_buffer(void *dev)
{
    ring_config_t cfg;
    ring_comm_t *comm;
    float out[COUNT];
    ring_status_t st;

    ring_config_init(&cfg);
    if (ring_config_set(&cfg, "rank", "0", RING_SRC_API) != RING_OK ||
        ring_config_set(&cfg, "world-size", "1", RING_SRC_API) != RING_OK ||
        ring_comm_open(&cfg, &comm) != RING_OK) {
        printf("# ring of one: %s\n", ring_last_error());
        return 2;
    }
    st = ring_allreduce(comm, dev, out, COUNT, RING_FLOAT32, RING_SUM);
    printf("# allreduce of the device buffer: %s: %s\n", ring_status_str(st), ring_last_error());
    ring_comm_close(comm);
    ring_config_free(&cfg);
    return st == RING_ERR_IO && strstr(ring_last_error(), "device sendbuf") != NULL ? 0 : 1;
}

/* exit 0: a pointer the driver answers with an error for is not device memory */
static int driver_error_pointer(void *p)
{
    return ring_cuda_is_device_ptr(p) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static float host_static[COUNT];
    float *heap = calloc(COUNT, sizeof(float)), *dev = calloc(COUNT, sizeof(float));
    float *managed = calloc(COUNT, sizeof(float)), *err_mem = calloc(COUNT, sizeof(float));
    char path[4096], dir[4096];
    void (*fake_set)(int, const void *, size_t);
    void *lib;
    int rc;

    (void)argc;
    if (!ring_cuda_built())
        skip_all("built without CUDA");
    if (libcuda_mapped())
        skip_all("a libcuda is loaded in this process already");
    if (heap == NULL || dev == NULL || managed == NULL || err_mem == NULL)
        bail("out of memory");
    plan(5);

    ok(ring_cuda_is_device_ptr(heap) == 0 && ring_cuda_is_device_ptr(host_static) == 0 &&
           !libcuda_mapped(),
       "no libcuda in the process: heap and static memory are host memory, and asking loaded "
       "no driver");

    /* the stand-in, built beside this program (-no-install: argv[0] is the binary) */
    snprintf(dir, sizeof dir, "%s", argv[0]);
    snprintf(path, sizeof path, "%s/.libs/libcuda.so.1", dirname(dir));
    lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL)
        bail("the stand-in driver %s: %s", path, dlerror());
    fake_set = (void (*)(int, const void *, size_t))dlsym(lib, "fake_cuda_set");
    if (fake_set == NULL)
        bail("fake_cuda_set: %s", dlerror());
    fake_set(FAKE_DEVICE, dev, COUNT * sizeof(float));
    fake_set(FAKE_MANAGED, managed, COUNT * sizeof(float));
    fake_set(FAKE_ERROR, err_mem, COUNT * sizeof(float));

    ok(ring_cuda_is_device_ptr(dev) == 1 && ring_cuda_is_device_ptr(dev + COUNT - 1) == 1,
       "with a driver loaded: what it calls device memory is device memory (also inside)");
    ok(ring_cuda_is_device_ptr(managed) == 0 && ring_cuda_is_device_ptr(heap) == 0 &&
           ring_cuda_is_device_ptr(NULL) == 0,
       "managed memory, and memory the driver does not know (heap), are host memory; NULL too");
    rc = in_child((int (*)(void *))allreduce_device_buffer, dev);
    ok(rc == 0, "an allreduce of a buffer the driver calls device memory takes the device path "
       "(here it fails with RING_ERR_IO naming the device sendbuf: no usable runtime; child "
       "exit %d)", rc);
    rc = in_child((int (*)(void *))driver_error_pointer, err_mem);
    ok(rc == 0, "a driver error leaves it to the runtime, which "
       "finds no device here: host memory (child exit %d)", rc);
    free(heap), free(dev), free(managed), free(err_mem);
    return done_testing();
}
