# RING_CHECK_VERBS: --with-verbs=check|yes|no (default check).
# Defines RING_HAVE_VERBS to 0 or 1 and sets VERBS_LIBS for the objects that need it.
AC_DEFUN([RING_CHECK_VERBS], [
  AC_ARG_WITH([verbs],
    [AS_HELP_STRING([--with-verbs=check|yes|no],
      [RDMA verbs transport via libibverbs (default: check)])],
    [], [with_verbs=check])
  ring_have_verbs=0
  VERBS_LIBS=""
  AS_IF([test "x$with_verbs" != xno], [
    AC_CHECK_HEADER([infiniband/verbs.h],
      [AC_CHECK_LIB([ibverbs], [ibv_get_device_list],
        [ring_have_verbs=1; VERBS_LIBS=-libverbs])])
    AS_IF([test "$ring_have_verbs" = 0 && test "x$with_verbs" = xyes],
      [AC_MSG_ERROR([--with-verbs=yes but libibverbs was not found: apt-get install libibverbs-dev])])
  ])
  AS_IF([test "$ring_have_verbs" = 1],
    [ring_verbs_summary="yes ($VERBS_LIBS): the verbs transport is built"],
    [ring_verbs_summary="no (--with-verbs=$with_verbs)"])
  AC_DEFINE_UNQUOTED([RING_HAVE_VERBS], [$ring_have_verbs], [1 if the verbs transport is built])
  AM_CONDITIONAL([HAVE_VERBS], [test "$ring_have_verbs" = 1])
  AC_SUBST([VERBS_LIBS])
])
