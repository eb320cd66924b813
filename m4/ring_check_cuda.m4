# RING_CHECK_CUDA: --with-cuda=check|yes|no|DIR (default check).
# Finds nvcc and the CUDA runtime's static library (libcudart_static.a).
# Defines RING_HAVE_CUDA to 0 or 1 and the HAVE_CUDA conditional;
# CUDA_CPPFLAGS/CUDA_LDFLAGS/CUDA_LIBS apply only to what needs them (the
# .cu rule and libringd's link).
#
# The runtime is linked statically, so that libringd and its programs load
# and run on machines without a CUDA driver or GPU (the runtime loads the
# driver itself, at run time, and reports its absence as an error, which
# libringd takes as "no device"). Its symbols are kept out of libringd's
# exports where the linker can (--exclude-libs), so an application with its
# own libcudart.so does not mix two runtimes. -lstdc++: nvcc's host code
# uses C++ guards for its kernel handles; libringd is linked by the C compiler.
AC_DEFUN([RING_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=check|yes|no|DIR],
      [CUDA kernels and device buffers, needs nvcc (default: check)])],
    [], [with_cuda=check])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  AC_ARG_VAR([NVCCFLAGS], [extra nvcc flags (after ringd's own: -O3 and the GPU architectures)])
  ring_have_cuda=0
  CUDA_CPPFLAGS=""; CUDA_LDFLAGS=""; CUDA_LIBS=""
  AS_IF([test "x$with_cuda" != xno], [
    # check|yes: /usr/local/cuda, then $PATH; DIR: that toolkit only
    ring_cuda_path="/usr/local/cuda/bin$PATH_SEPARATOR$PATH"
    AS_CASE([$with_cuda], [check|yes], [], [ring_cuda_path="$with_cuda/bin"])
    AC_PATH_PROG([NVCC], [nvcc], [], [$ring_cuda_path])
    AS_IF([test -n "$NVCC"], [
      ring_cuda_root=$(dirname "$(dirname "$NVCC")")
      ring_save_CPPFLAGS=$CPPFLAGS; ring_save_LIBS=$LIBS; ring_save_LDFLAGS=$LDFLAGS
      CPPFLAGS="$CPPFLAGS -I$ring_cuda_root/include"
      LDFLAGS="$LDFLAGS -L$ring_cuda_root/lib64"
      AC_CHECK_HEADER([cuda_runtime_api.h],
        [AC_CHECK_LIB([cudart_static], [cudaGetDeviceCount], [ring_have_cuda=1], [],
          [-ldl -lrt -lpthread])])
      AS_IF([test "$ring_have_cuda" = 1], [
        AC_MSG_CHECKING([whether the linker accepts --exclude-libs])
        LDFLAGS="$LDFLAGS -Wl,--exclude-libs,libcudart_static.a"
        AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])],
          [ring_cuda_exclude="-Wl,--exclude-libs,libcudart_static.a"; AC_MSG_RESULT([yes])],
          [ring_cuda_exclude=""; AC_MSG_RESULT([no])])
      ])
      CPPFLAGS=$ring_save_CPPFLAGS; LIBS=$ring_save_LIBS; LDFLAGS=$ring_save_LDFLAGS
      AS_IF([test "$ring_have_cuda" = 1], [
        CUDA_CPPFLAGS="-I$ring_cuda_root/include"
        CUDA_LDFLAGS="-L$ring_cuda_root/lib64 $ring_cuda_exclude"
        # the -L here too: programs that link libringd_internal.la (the tests)
        # take the static runtime from it, not from libringd.so
        CUDA_LIBS="-L$ring_cuda_root/lib64 -lcudart_static -lstdc++ -ldl -lrt -lpthread"
      ])
    ])
    AS_IF([test "$ring_have_cuda" = 0 && test "x$with_cuda" != xcheck],
      [AC_MSG_ERROR([--with-cuda=$with_cuda but nvcc and the static CUDA runtime (libcudart_static.a) were not found])])
  ])
  AS_IF([test "$ring_have_cuda" = 1],
    [ring_cuda_summary="yes ($NVCC, static runtime)"],
    [ring_cuda_summary="no (--with-cuda=$with_cuda)"])
  AC_DEFINE_UNQUOTED([RING_HAVE_CUDA], [$ring_have_cuda], [1 if CUDA kernels are built])
  AM_CONDITIONAL([HAVE_CUDA], [test "$ring_have_cuda" = 1])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
])
