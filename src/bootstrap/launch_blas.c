/*
 * launch_blas.c - ring_launch_blas_advice: is the OpenBLAS in this process
 * running kernels this CPU can outrun several times over?
 *
 * ring-launch sets OPENBLAS_CORETYPE for its ranks and the ringd program
 * warns at start; a framework's process (PyTorch started by torchrun, srun or
 * mpirun, with ringd's Python package) has neither, and its OpenBLAS is not
 * libringd's: the framework loaded it, often with RTLD_LOCAL, so it is looked
 * up among the loaded objects by name and asked through its own handle.
 */
#include "ring_build.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringd/launch.h>

#include "blas_core.h"

typedef char *(*corename_fn_t)(void);

/* OpenBLAS linked statically into the program (the manylinux_2_28 wheel's programs):
 * a weak reference finds it where dlsym cannot (the linker did not export it) */
extern char *openblas_get_corename(void) __attribute__((weak));

/* OpenBLAS's own name, then the renamed copies of the scipy-openblas builds that
 * numpy's and scipy's wheels from PyPI carry (ILP64 for numpy 2, LP64 for scipy) */
static const char *const corename_symbols[] = {
    "openblas_get_corename", "scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
};
#define CORENAME_SYMBOLS (sizeof(corename_symbols) / sizeof(corename_symbols[0]))

/* dl_iterate_phdr: the first loaded object named *blas* that exports the function */
static int find_corename(struct dl_phdr_info *info, size_t size, void *arg)
{
    corename_fn_t *fn = arg;
    void *handle, *sym;

    (void)size;
    if (info->dlpi_name == NULL || strstr(info->dlpi_name, "blas") == NULL)
        return 0;
    /* already loaded: RTLD_NOLOAD only hands out another reference to it */
    handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL)
        return 0;
    sym = NULL;
    for (size_t i = 0; i < CORENAME_SYMBOLS && sym == NULL; i++)
        sym = dlsym(handle, corename_symbols[i]);
    dlclose(handle); /* the framework's reference keeps it loaded */
    if (sym == NULL)
        return 0;
    memcpy(fn, &sym, sizeof(*fn)); /* POSIX: a data pointer from dlsym is the function */
    return 1;
}

int ring_launch_blas_advice(char *coretype, size_t coretype_len, char *why, size_t why_len)
{
    const char *chosen = getenv("OPENBLAS_CORETYPE"), *core, *advice;
    corename_fn_t fn = NULL;
    void *sym;
    ring_cpu_level_t level;

    if (chosen != NULL && chosen[0] != '\0')
        return 0; /* someone chose already */
    sym = dlsym(RTLD_DEFAULT, corename_symbols[0]); /* linked into the program */
    if (openblas_get_corename != NULL)
        fn = openblas_get_corename;
    else if (sym != NULL)
        memcpy(&fn, &sym, sizeof(fn));
    else
        (void)dl_iterate_phdr(find_corename, &fn);
    if (fn == NULL)
        return 0; /* no OpenBLAS here (MKL, a BLAS-free program) */
    core = fn();
    level = ring_cpu_level_detect();
    advice = ring_blas_coretype_advice(core, level);
    if (advice == NULL)
        return 0;
    if (coretype != NULL && coretype_len > 0)
        snprintf(coretype, coretype_len, "%s", advice);
    if (why != NULL && why_len > 0)
        snprintf(why, why_len, "OpenBLAS does not know this CPU (%s) and runs its generic %s "
                 "kernels, several times slower; set OPENBLAS_CORETYPE=%s in every peer's "
                 "environment before the program starts (ring-launch does when it is unset)",
                 ring_cpu_level_name(level), core, advice);
    return 1;
}
