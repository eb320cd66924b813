# RING_CHECK_PYTHON: --with-python=check|yes|no|PATH (default check).
# The Python package `ringd` (python/): a C extension over libringd, built for
# the first interpreter that imports numpy: $PYTHON when the user set it, else
# python3 on PATH, else /usr/bin/python3 (Debian's, where apt's python3-numpy
# and python3-torch live, when a pyenv or venv python3 without numpy comes
# first on PATH). PATH: that interpreter only. yes fails loudly when no
# interpreter with numpy and its headers is found; check skips the package
# and says why.
#
# Sets PYTHON, pythondir and pyexecdir (AM_PATH_PYTHON; on Debian the
# dist-packages directory its python3 searches: /usr/local/lib/python3.X/
# dist-packages for prefix /usr/local), PYTHON_CPPFLAGS (Python.h, for the
# extension only), RING_PY_ASAN_RUNTIME (the AddressSanitizer runtime the
# Python tests preload in a --enable-sanitizers build), RING_PY_SKIP (why the
# Python tests skip, "" when built), the HAVE_PYTHON_EXT conditional and
# ring_python_summary.
AC_DEFUN([RING_CHECK_PYTHON], [
  AC_ARG_WITH([python],
    [AS_HELP_STRING([--with-python=check|yes|no|PATH],
      [the Python package (a C extension), for an interpreter with numpy (default: check)])],
    [], [with_python=check])
  ring_have_python=0
  ring_python_why=""
  PYTHON_CPPFLAGS=""
  RING_PY_ASAN_RUNTIME=""
  AS_CASE([$with_python],
    [no], [ring_python_why="--without-python"],
    [check|yes], [AS_IF([test -n "$PYTHON"], [ring_py_candidates=$PYTHON],
                        [ring_py_candidates="python3 /usr/bin/python3"])],
    [ring_py_candidates=$with_python])
  AS_IF([test "x$with_python" != xno], [
    AC_MSG_CHECKING([for a Python 3 interpreter with numpy])
    ring_py_found=""
    ring_py_tried=""
    for ring_py in $ring_py_candidates; do
      ring_py_path=$(command -v "$ring_py" 2>/dev/null) || ring_py_path=""
      AS_IF([test -z "$ring_py_path"],
        [ring_py_tried="${ring_py_tried:+$ring_py_tried,} $ring_py (not found)"; continue])
      AS_IF([echo " $ring_py_tried" | grep -qF " $ring_py_path "], [continue])
      AS_IF(["$ring_py_path" -c 'import sys; assert sys.version_info >= (3, 7); import numpy' \
               >/dev/null 2>&1],
        [ring_py_found=$ring_py_path; break])
      ring_py_tried="${ring_py_tried:+$ring_py_tried,} $ring_py_path (no numpy)"
    done
    AS_IF([test -n "$ring_py_found"],
      [AC_MSG_RESULT([$ring_py_found${ring_py_tried:+ (passed over:$ring_py_tried)}])],
      [AC_MSG_RESULT([none:$ring_py_tried])
       ring_python_why="no Python 3 with numpy:$ring_py_tried; install python3-numpy or pass"
       ring_python_why="$ring_python_why --with-python=PATH"])
  ])
  AS_IF([test -n "$ring_py_found"], [
    PYTHON=$ring_py_found
    AM_PATH_PYTHON([3.7], [], [:])
    # Debian's python3 searches /usr/local/lib/python3.X/dist-packages, not the
    # site-packages automake derives from its posix_prefix scheme
    ring_py_scheme=$($PYTHON -c 'import sysconfig; print(sysconfig.get_default_scheme())' \
                       2>/dev/null)
    AS_IF([test "x$ring_py_scheme" = xposix_local], [
      AS_CASE([$pythondir], [*/site-packages],
        [pythondir=$(echo "$pythondir" | sed 's,/site-packages$,/dist-packages,')])
      AS_CASE([$pyexecdir], [*/site-packages],
        [pyexecdir=$(echo "$pyexecdir" | sed 's,/site-packages$,/dist-packages,')])
    ])
    AC_MSG_CHECKING([where the Python package goes])
    ring_save_prefix=$prefix; ring_save_exec_prefix=$exec_prefix
    test "x$prefix" = xNONE && prefix=$ac_default_prefix
    test "x$exec_prefix" = xNONE && exec_prefix=$prefix
    ring_py_dir=$pyexecdir
    for ring_i in 1 2 3 4; do ring_py_dir=$(eval echo "$ring_py_dir"); done
    prefix=$ring_save_prefix; exec_prefix=$ring_save_exec_prefix
    AC_MSG_RESULT([$ring_py_dir/ringd])
    ring_py_inc=$($PYTHON -c 'import sysconfig; print(sysconfig.get_paths()[["include"]])' \
                    2>/dev/null)
    ring_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS -I$ring_py_inc"
    AC_CHECK_HEADER([Python.h], [ring_have_python=1],
      [ring_python_why="$PYTHON has no Python.h in $ring_py_inc: apt-get install python3-dev"])
    CPPFLAGS=$ring_save_CPPFLAGS
    PYTHON_CPPFLAGS="-I$ring_py_inc"
  ])
  AS_IF([test "$ring_have_python" = 0 && test "x$with_python" != xno &&
         test "x$with_python" != xcheck],
    [ring_py_err="--with-python=$with_python but the Python package cannot be built"
     AC_MSG_ERROR([$ring_py_err: $ring_python_why])])
  AS_IF([test "$ring_have_python" = 1], [
    ring_py_torch=$($PYTHON -c 'import torch; print("torch " + torch.__version__)' 2>/dev/null) ||
      ring_py_torch="no torch: its tests skip"
    ring_py_numpy=$($PYTHON -c 'import numpy; print(numpy.__version__)' 2>/dev/null)
    ring_python_summary="yes: $PYTHON (numpy $ring_py_numpy, $ring_py_torch) -> $ring_py_dir/ringd"
    AS_IF([test -n "$ring_py_tried"],
      [ring_python_summary="$ring_python_summary; passed over:$ring_py_tried"])
    # a sanitizer build's extension needs the ASan runtime loaded first: the
    # Python tests preload it (the interpreter itself is not instrumented)
    AS_IF([test "x$enable_sanitizers" = xyes], [
      for ring_rt in libasan.so libclang_rt.asan-x86_64.so; do
        ring_rt_path=$($CC -print-file-name=$ring_rt 2>/dev/null)
        AS_IF([test -n "$ring_rt_path" && test "$ring_rt_path" != "$ring_rt" &&
               test -e "$ring_rt_path"],
          [RING_PY_ASAN_RUNTIME=$ring_rt_path; break])
      done
      AS_IF([test -n "$RING_PY_ASAN_RUNTIME"],
        [ring_python_summary="$ring_python_summary; its tests preload $RING_PY_ASAN_RUNTIME"],
        [ring_python_summary="$ring_python_summary; its tests skip (no ASan runtime)"])
    ])
  ], [
    # nothing installs there, but `make installdirs` must not make /ringd
    pythondir='${libdir}/python3/dist-packages'
    pyexecdir='${libdir}/python3/dist-packages'
    AC_SUBST([pythondir])
    AC_SUBST([pyexecdir])
    ring_python_summary="no, the Python package is skipped: $ring_python_why"
  ])
  # why the Python tests skip ("" when the package is built)
  AS_IF([test "$ring_have_python" = 1], [RING_PY_SKIP=""], [RING_PY_SKIP=$ring_python_why])
  AC_SUBST([RING_PY_SKIP])
  AC_SUBST([PYTHON_CPPFLAGS])
  AC_SUBST([RING_PY_ASAN_RUNTIME])
  AM_CONDITIONAL([HAVE_PYTHON_EXT], [test "$ring_have_python" = 1])
])
