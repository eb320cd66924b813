# RING_CHECK_VERBS: --with-verbs=check|yes|no (default check).
# Defines RING_HAVE_VERBS to 0 or 1. The transport is built against the header
# only: libibverbs is loaded at run time (transport/verbs_dl.c), never linked,
# so libringd and the Python wheel load on hosts without rdma-core. VERBS_LIBS
# is what dlopen needs (-ldl before glibc 2.34, else nothing).
AC_DEFUN([RING_CHECK_VERBS], [
  AC_ARG_WITH([verbs],
    [AS_HELP_STRING([--with-verbs=check|yes|no],
      [RDMA verbs transport, libibverbs loaded at run time (default: check)])],
    [], [with_verbs=check])
  ring_have_verbs=0
  VERBS_LIBS=""
  AS_IF([test "x$with_verbs" != xno], [
    AC_CHECK_HEADER([infiniband/verbs.h], [ring_have_verbs=1])
    AS_IF([test "$ring_have_verbs" = 0 && test "x$with_verbs" = xyes],
      [AC_MSG_ERROR([--with-verbs=yes but infiniband/verbs.h was not found: apt-get install libibverbs-dev])])
  ])
  AS_IF([test "$ring_have_verbs" = 1], [
    dnl only the objects that dlopen get the library, not every program (LIBS)
    ring_save_LIBS=$LIBS
    AC_SEARCH_LIBS([dlopen], [dl],
      [AS_IF([test "x$ac_cv_search_dlopen" != "xnone required"], [VERBS_LIBS=$ac_cv_search_dlopen])],
      [ring_have_verbs=0
       AS_IF([test "x$with_verbs" = xyes],
         [AC_MSG_ERROR([--with-verbs=yes but dlopen was not found: the verbs transport loads libibverbs with it])])])
    LIBS=$ring_save_LIBS
  ])
  AS_IF([test "$ring_have_verbs" = 1],
    [ring_verbs_summary="yes: the verbs transport is built, libibverbs.so.1 loaded at run time${VERBS_LIBS:+ ($VERBS_LIBS)}"],
    [ring_verbs_summary="no (--with-verbs=$with_verbs)"])
  AC_DEFINE_UNQUOTED([RING_HAVE_VERBS], [$ring_have_verbs], [1 if the verbs transport is built])
  AM_CONDITIONAL([HAVE_VERBS], [test "$ring_have_verbs" = 1])
  AC_SUBST([VERBS_LIBS])
])
