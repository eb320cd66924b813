# RING_CHECK_CUDA: --with-cuda=check|yes|no|DIR (default check).
# Finds nvcc and the CUDA runtime, cuBLAS and cuDNN. Defines RING_HAVE_CUDA to
# 0 or 1; CUDA_CPPFLAGS/CUDA_LDFLAGS/CUDA_LIBS apply only to objects that need them.
AC_DEFUN([RING_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=check|yes|no|DIR],
      [CUDA kernels and GPU workload, needs nvcc (default: check)])],
    [], [with_cuda=check])
  AC_ARG_VAR([NVCC], [CUDA compiler])
  ring_have_cuda=0
  CUDA_CPPFLAGS=""; CUDA_LDFLAGS=""; CUDA_LIBS=""
  AS_IF([test "x$with_cuda" != xno], [
    ring_cuda_dir=/usr/local/cuda
    AS_CASE([$with_cuda], [check|yes], [], [ring_cuda_dir=$with_cuda])
    AC_PATH_PROG([NVCC], [nvcc], [], [$ring_cuda_dir/bin$PATH_SEPARATOR$PATH])
    AS_IF([test -n "$NVCC"], [
      ring_cuda_root=$(dirname "$(dirname "$NVCC")")
      ring_save_CPPFLAGS=$CPPFLAGS; ring_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS -I$ring_cuda_root/include"
      LIBS="$LIBS -L$ring_cuda_root/lib64"
      AC_CHECK_HEADER([cuda_runtime_api.h],
        [AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [ring_have_cuda=1])])
      CPPFLAGS=$ring_save_CPPFLAGS; LIBS=$ring_save_LIBS
      AS_IF([test "$ring_have_cuda" = 1], [
        CUDA_CPPFLAGS="-I$ring_cuda_root/include"
        CUDA_LDFLAGS="-L$ring_cuda_root/lib64 -Wl,-rpath,$ring_cuda_root/lib64"
        CUDA_LIBS="-lcudart"
      ])
    ])
    AS_IF([test "$ring_have_cuda" = 0 && test "x$with_cuda" != xcheck],
      [AC_MSG_ERROR([--with-cuda=$with_cuda but nvcc and the CUDA runtime were not found])])
  ])
  AS_IF([test "$ring_have_cuda" = 1],
    [ring_cuda_summary="yes ($NVCC)"],
    [ring_cuda_summary="no (--with-cuda=$with_cuda)"])
  AC_DEFINE_UNQUOTED([RING_HAVE_CUDA], [$ring_have_cuda], [1 if CUDA kernels are built])
  AM_CONDITIONAL([HAVE_CUDA], [test "$ring_have_cuda" = 1])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
])
