"""setuptools' build_ext for ringd: the extension ringd._ringd with libringd
compiled into it, and the programs ringd, ring-launch and ring-bench in
ringd/_bin (their console entry points are ringd._programs).

Every source file, per-library flag and link dependency comes from
Makefile.am (am_reader), evaluated as configure would evaluate it on this
machine: what `make` builds is what the wheel holds. What configure decides
is decided here by probe.py (the same libraries, the same messages)."""

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError, LinkError

from . import probe
from .am_reader import Automake, canonical

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the programs that reach pip users, by their automake names (Makefile.am's bin_PROGRAMS
# also has ring-kernel-bench, a tool for developers of the kernels)
PROGRAMS = ["ringd", "ring-launch", "ring-bench"]
# shipped beside ring-bench, which runs it for --sweep (found next to its own path)
PROGRAM_SCRIPTS = ["tools/experiments/ring-sweep"]
EXTENSION_TARGET = "python/_ringd.la"
# configure.ac's warnings (RING_WARN_CFLAGS), less the ones that only matter to developers
WARN_CFLAGS = "-Wall -Wextra -Wno-unused-parameter"


def package_version():
    """The version in configure.ac's AC_INIT, the one `make` builds."""
    with open(os.path.join(TOP, "configure.ac"), encoding="utf-8") as f:
        m = re.search(r"AC_INIT\(\[ringd\],\s*\[([^\]]+)\]", f.read())
    if not m:
        raise RuntimeError("configure.ac has no AC_INIT([ringd], [VERSION])")
    return m.group(1)


def _config_header(path, version, have_verbs, have_cuda):
    """ring_build.h as configure writes it, for the macros the sources read."""
    lines = ["/* ring_build.h, written by ringd's Python build (python/build_support) */",
             '#define PACKAGE "ringd"', '#define PACKAGE_NAME "ringd"',
             '#define PACKAGE_TARNAME "ringd"', '#define PACKAGE_VERSION "%s"' % version,
             '#define PACKAGE_STRING "ringd %s"' % version, '#define VERSION "%s"' % version,
             "#define RING_DEBUG_BUILD 0", "#define RING_HAVE_VERBS %d" % have_verbs,
             "#define RING_HAVE_CUDA %d" % have_cuda, "#define RING_HAVE_CUDNN 0",
             "#define HAVE_DLFCN_H 1", "#define STDC_HEADERS 1",
             # what AC_USE_SYSTEM_EXTENSIONS turns on for glibc
             "#ifndef _GNU_SOURCE", "# define _GNU_SOURCE 1", "#endif",
             "#ifndef _ALL_SOURCE", "# define _ALL_SOURCE 1", "#endif",
             "#ifndef __STDC_WANT_LIB_EXT2__", "# define __STDC_WANT_LIB_EXT2__ 1", "#endif",
             "#ifndef __STDC_WANT_IEC_60559_BFP_EXT__",
             "# define __STDC_WANT_IEC_60559_BFP_EXT__ 1", "#endif", ""]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    text = "\n".join(lines)
    try:
        with open(path) as f:
            if f.read() == text:
                return  # unchanged: every object that includes it stays up to date
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)


class BuildRingd(build_ext):
    """Compiles libringd's objects once and links them into the extension and
    the programs; -j (or RINGD_BUILD_JOBS) compiles in parallel."""

    def _configure(self):
        found = probe.check_required()
        self.cuda_root = probe.find_cuda()
        want_verbs = os.environ.get("RINGD_WITH_VERBS", "check").lower()
        self.have_verbs = want_verbs not in ("0", "no", "off") and \
            probe.have_header("infiniband/verbs.h")
        if want_verbs in ("1", "yes") and not self.have_verbs:
            raise probe.MissingDependency(
                "RINGD_WITH_VERBS=%s but <infiniband/verbs.h> was not found: apt-get install "
                "libibverbs-dev (dnf install rdma-core-devel)" % want_verbs)
        cuda = self.cuda_root or ""
        self.subst = {
            "srcdir": TOP, "top_srcdir": TOP, "abs_top_srcdir": TOP,
            "abs_builddir": os.path.abspath(self.build_temp),
            "RING_OPT_CFLAGS": "-O2", "RING_WARN_CFLAGS": WARN_CFLAGS, "RING_SAN_CFLAGS": "",
            "CRYPTO_LIBS": "-lcrypto", "LZ4_LIBS": "-llz4", "ZLIB_LIBS": "-lz",
            "JANSSON_LIBS": "-ljansson", "BLAS_LIBS": "-lopenblas",
            # libibverbs is opened at run time (transport/verbs_dl.c), never linked
            "VERBS_LIBS": "",
            "CUDA_CPPFLAGS": "-I%s/include" % cuda if cuda else "",
            "CUDA_LDFLAGS": "-L%s/lib64 -Wl,--exclude-libs,libcudart_static.a" % cuda if cuda else "",
            "CUDA_LIBS": "-L%s/lib64 -lcudart_static -lstdc++ -ldl -lrt -lpthread" % cuda if cuda else "",
            "CUDNN_LIBS": "",
            "PYTHON_CPPFLAGS": " ".join("-I" + d for d in self.include_dirs),
            "RING_NVCC_WARN": "-Xcompiler=-Wall,-Wextra", "NVCC": os.path.join(cuda, "bin", "nvcc"),
        }
        self.am = Automake(TOP, {"HAVE_VERBS": self.have_verbs, "HAVE_CUDA": bool(cuda),
                                 "HAVE_CUDNN": False, "HAVE_PYTHON_EXT": True}, self.subst)
        self.include_first = [os.path.join(os.path.abspath(self.build_temp), "config")]
        _config_header(os.path.join(self.include_first[0], "ring_build.h"), package_version(),
                       int(self.have_verbs), int(bool(cuda)))
        self.extra_include = found["include_dirs"]
        if self.have_verbs:
            verbs = "built (libibverbs is opened at run time, where the host has it)"
        elif want_verbs in ("0", "no", "off"):
            verbs = "not built (RINGD_WITH_VERBS=%s)" % want_verbs
        else:
            verbs = "not built (no <infiniband/verbs.h>: apt-get install libibverbs-dev)"
        print("ringd: verbs transport %s; CUDA kernels %s" % (verbs,
            "built with %s" % cuda if cuda else "off (RINGD_WITH_CUDA=1 builds them)"))

    # ---- what a target is made of ----
    def _flags(self, target, kind):
        """A target's CPPFLAGS or CFLAGS as automake would pass them."""
        name = canonical(target) + "_" + kind
        if self.am.has(name):
            return self.am.words(name)
        return self.am.words("AM_" + kind, default=[])

    def _link_closure(self, words):
        """(convenience libraries in link order, other link flags) of an LDADD/LIBADD."""
        libs, flags, todo = [], [], list(words)
        while todo:
            w = todo.pop(0)
            if w.endswith(".la"):
                if w not in libs:
                    libs.append(w)
                    todo = self.am.words(canonical(w) + "_LIBADD", default=[]) + todo
            elif w not in flags or not w.startswith("-l"):
                flags.append(w)
        return libs, flags

    # ---- compiling ----
    def _compile_target(self, target):
        """Compiles a target's .c (and, with CUDA, .cu) sources: its objects."""
        sources = [s for s in self.am.words(canonical(target) + "_SOURCES", default=[])
                   if s.endswith((".c", ".cu"))]
        cppflags = [f for f in self._flags(target, "CPPFLAGS")
                    if not f.startswith("-DRING_TOOLS_DIR=")]  # a build-tree path: not in a wheel
        cflags = self._flags(target, "CFLAGS")
        # automake's DEFS (configure's AC_CONFIG_HEADERS) and DEFAULT_INCLUDES
        includes = ["-DHAVE_CONFIG_H"] + ["-I" + d for d in self.include_first + self.extra_include]
        out_dir = os.path.join(self.build_temp, "objects", canonical(target))
        jobs = []
        for src in sources:
            obj = os.path.join(out_dir, src.replace("/", "_").rsplit(".", 1)[0] + ".o")
            jobs.append((src, obj))

        def one(job):
            src, obj = job
            if _up_to_date(obj):
                return obj
            os.makedirs(os.path.dirname(obj), exist_ok=True)
            if src.endswith(".cu"):
                cmd = [self.subst["NVCC"]] + includes + cppflags + \
                    self.am.words("RING_NVCC_FLAGS") + ["-c", os.path.join(TOP, src), "-o", obj]
            else:
                cmd = self.compiler.compiler_so + includes + cppflags + cflags + \
                    ["-fPIC", "-MMD", "-MF", obj + ".d", "-c", os.path.join(TOP, src), "-o", obj]
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True)
            if r.returncode != 0:
                raise CompileError("ringd: compiling %s failed:\n%s\n%s" %
                                   (src, " ".join(cmd), r.stdout))
            if r.stdout.strip():
                print(r.stdout.rstrip())
            return obj

        with concurrent.futures.ThreadPoolExecutor(self._jobs()) as pool:
            return list(pool.map(one, jobs))

    def _jobs(self):
        env = os.environ.get("RINGD_BUILD_JOBS")
        if env and env.isdigit() and int(env) > 0:
            return int(env)
        if isinstance(self.parallel, int) and self.parallel > 0:
            return self.parallel
        return os.cpu_count() or 2

    def _objects_of(self, libs):
        objs = []
        for lib in libs:
            if lib not in self._compiled:
                self._compiled[lib] = self._compile_target(lib)
            objs += self._compiled[lib]
        return objs

    # ---- linking ----
    def build_extension(self, ext):
        self._configure()
        self._compiled = {}
        print("ringd: compiling libringd and the extension (%d jobs)" % self._jobs())
        ext_objs = self._compile_target(EXTENSION_TARGET)
        libs, flags = self._link_closure(self.am.words(canonical(EXTENSION_TARGET) + "_LIBADD"))
        objs = ext_objs + self._objects_of(libs)
        out = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        # the module's init function alone is exported: libringd's API (RING_API) is
        # inside this module, not offered to the rest of the process
        exports = os.path.join(self.build_temp, "ringd-module.map")
        with open(exports, "w") as f:
            f.write("{ global: PyInit_%s; local: *; };\n" % ext.name.rsplit(".", 1)[-1])
        link = self.compiler.linker_so + objs + ["-o", out, "-Wl,--version-script=" + exports] + \
            flags + \
            (self.subst["CUDA_LDFLAGS"].split() if self.cuda_root else []) + \
            ["-lpthread", "-lm", "-ldl"] + _env("LDFLAGS")
        _run(link, "linking " + ext.name)
        bin_dir = os.path.join(os.path.dirname(out), "_bin")
        os.makedirs(bin_dir, exist_ok=True)
        for prog in PROGRAMS:
            p_objs = self._compile_target(prog)
            p_libs, p_flags = self._link_closure(self.am.words(canonical(prog) + "_LDADD"))
            exe = os.path.join(bin_dir, prog)
            _run(self.compiler.linker_exe + p_objs + self._objects_of(p_libs) + ["-o", exe] +
                 p_flags + ["-lpthread", "-lm", "-ldl"] + _env("LDFLAGS"), "linking " + prog)
        for script in PROGRAM_SCRIPTS:
            dst = os.path.join(bin_dir, os.path.basename(script))
            shutil.copyfile(os.path.join(TOP, script), dst)
            os.chmod(dst, 0o755)


def _env(name):
    return os.environ.get(name, "").split()


def _up_to_date(obj):
    """Whether obj is newer than its source and every header it included (the
    compiler's -MMD list): pip reuses the build directory of a source tree. nvcc's
    objects have no list and are always compiled again."""
    try:
        built = os.path.getmtime(obj)
        with open(obj + ".d") as f:
            deps = f.read().replace("\\\n", " ").split(":", 1)[1].split()
        return all(os.path.getmtime(d) <= built for d in deps)
    except (OSError, IndexError):
        return False


def _run(cmd, what):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if r.returncode != 0:
        raise LinkError("ringd: %s failed:\n%s\n%s" % (what, " ".join(cmd), r.stdout))
    if r.stdout.strip():
        print(r.stdout.rstrip())
    sys.stdout.flush()
