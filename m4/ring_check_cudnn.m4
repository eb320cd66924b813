# RING_CHECK_CUDNN: cuDNN and cuBLAS for the GPU path of the fmnist-cnn
# workload (`ringd --device cuda`). Only looked for when CUDA was found
# (RING_CHECK_CUDA first); --without-cudnn turns it off. Defines
# RING_HAVE_CUDNN to 0 or 1 and the HAVE_CUDNN conditional; CUDNN_LIBS is
# linked into the daemon only (libringd never needs it). Both libraries are
# linked dynamically: like the static runtime, they load without a driver
# and report "no device" at run time.
AC_DEFUN([RING_CHECK_CUDNN], [
  AC_REQUIRE([RING_CHECK_CUDA])
  AC_ARG_WITH([cudnn],
    [AS_HELP_STRING([--with-cudnn=check|yes|no],
      [cuDNN/cuBLAS GPU path of the CNN workload, needs CUDA (default: check)])],
    [], [with_cudnn=check])
  ring_have_cudnn=0
  CUDNN_LIBS=""
  AS_IF([test "$ring_have_cuda" = 1 && test "x$with_cudnn" != xno], [
    ring_save_CPPFLAGS=$CPPFLAGS; ring_save_LDFLAGS=$LDFLAGS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
    LDFLAGS="$LDFLAGS -L$ring_cuda_root/lib64"
    AC_CHECK_HEADER([cudnn.h],
      [AC_CHECK_LIB([cudnn], [cudnnCreate],
        [AC_CHECK_LIB([cublas], [cublasCreate_v2], [ring_have_cudnn=1])])])
    CPPFLAGS=$ring_save_CPPFLAGS; LDFLAGS=$ring_save_LDFLAGS
  ])
  AS_IF([test "$ring_have_cudnn" = 0 && test "x$with_cudnn" = xyes],
    [AC_MSG_ERROR([--with-cudnn=yes but CUDA, cudnn.h, libcudnn or libcublas was not found])])
  AS_IF([test "$ring_have_cudnn" = 1], [
    CUDNN_LIBS="-L$ring_cuda_root/lib64 -Wl,-rpath,$ring_cuda_root/lib64 -lcudnn -lcublas"
    ring_cudnn_summary="yes"
  ], [ring_cudnn_summary="no"])
  AC_DEFINE_UNQUOTED([RING_HAVE_CUDNN], [$ring_have_cudnn], [1 if the cuDNN workload path is built])
  AM_CONDITIONAL([HAVE_CUDNN], [test "$ring_have_cudnn" = 1])
  AC_SUBST([CUDNN_LIBS])
])
