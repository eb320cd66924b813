"""What the Python build needs from the system, checked before anything is
compiled, so that a missing package is named once, with the command that
installs it, instead of surfacing as a compiler error in the middle of a
hundred files. The same libraries and messages as configure.ac."""

import os
import shutil
import subprocess
import tempfile

from setuptools.errors import PlatformError


class MissingDependency(PlatformError):
    """One or more system packages that the build needs are not installed."""


# (what, header, library, a function in it, Debian package, RHEL/Alma package)
REQUIRED = [
    ("lz4 (frame compression)", "lz4.h", "lz4", "LZ4_compress_default", "liblz4-dev", "lz4-devel"),
    ("zlib (the dataset's gzip files)", "zlib.h", "z", "gzopen", "zlib1g-dev", "zlib-devel"),
    ("jansson (TF_CONFIG)", "jansson.h", "jansson", "json_loads", "libjansson-dev", "jansson-devel"),
    ("OpenSSL's libcrypto (peer authentication)", "openssl/hmac.h", "crypto", "HMAC",
     "libssl-dev", "openssl-devel"),
    ("OpenBLAS (the daemon's workloads; ring-launch asks it which kernels it runs)", "cblas.h",
     "openblas", "cblas_sgemm", "libopenblas-dev", "openblas-devel"),
]
# where some distributions keep a header outside the compiler's search path
EXTRA_INCLUDE_DIRS = {"cblas.h": ["/usr/include/openblas"]}


def _cc():
    import sysconfig
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return cc.split()


def _try(cc, code, args, workdir):
    src = os.path.join(workdir, "probe.c")
    with open(src, "w") as f:
        f.write(code)
    cmd = cc + [src, "-o", os.path.join(workdir, "probe")] + args
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    return r.returncode == 0, r.stdout


def _env_flags(name):
    return os.environ.get(name, "").split()


def check_required():
    """Returns {"include_dirs": [...]} of extra directories found; raises
    MissingDependency naming every missing package."""
    cc = _cc()
    flags = _env_flags("CPPFLAGS") + _env_flags("CFLAGS")
    ldflags = _env_flags("LDFLAGS")
    missing, include_dirs = [], []
    with tempfile.TemporaryDirectory(prefix="ringd-probe-") as work:
        for what, header, lib, func, deb, rpm in REQUIRED:
            code = "#include <%s>\nint main(void) { return 0; }\n" % header
            ok, _ = _try(cc, code, flags + ["-c"], work)
            extra = []
            for d in EXTRA_INCLUDE_DIRS.get(header, []):
                if ok:
                    break
                ok, _ = _try(cc, code, flags + ["-I" + d, "-c"], work)
                extra = ["-I" + d] if ok else []
            if not ok:
                missing.append("  %s: <%s> not found. Debian/Ubuntu: apt-get install %s; "
                               "RHEL/Alma/Rocky: dnf install %s" % (what, header, deb, rpm))
                continue
            include_dirs += [e[2:] for e in extra]
            # declared by hand: the link is what is checked, not the prototype
            code = "char %s(void);\nint main(void) { return (int)(long)&%s; }\n" % (func, func)
            ok, out = _try(cc, code, flags + ldflags + ["-l" + lib], work)
            if not ok:
                last = (out.strip().splitlines() or ["the linker said nothing"])[-1]
                missing.append("  %s: the header is there but -l%s does not link (%s). "
                               "Debian/Ubuntu: apt-get install %s; RHEL/Alma/Rocky: dnf "
                               "install %s" % (what, lib, last, deb, rpm))
    if missing:
        raise MissingDependency(
            "ringd's Python build needs these system packages, which were not found:\n" +
            "\n".join(missing) +
            "\nInstalled somewhere else? Point the compiler at it: "
            "CPPFLAGS=-I/prefix/include LDFLAGS=-L/prefix/lib pip install ...")
    return {"include_dirs": include_dirs}


def have_header(header):
    cc = _cc()
    with tempfile.TemporaryDirectory(prefix="ringd-probe-") as work:
        ok, _ = _try(cc, "#include <%s>\nint main(void) { return 0; }\n" % header,
                     _env_flags("CPPFLAGS") + _env_flags("CFLAGS") + ["-c"], work)
    return ok


def find_cuda():
    """The CUDA toolkit's root when the build was asked for CUDA, else None.
    Asked: RINGD_WITH_CUDA=1 (or a directory: the toolkit there)."""
    asked = os.environ.get("RINGD_WITH_CUDA", "0").strip()
    if asked in ("", "0", "no", "off", "false"):
        return None
    candidates = []
    if asked not in ("1", "yes", "on", "true"):
        candidates.append(asked)
    else:
        candidates += [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
        nvcc = shutil.which("nvcc")
        if nvcc:
            candidates.append(os.path.dirname(os.path.dirname(nvcc)))
    for root in candidates:
        if root and os.access(os.path.join(root, "bin", "nvcc"), os.X_OK) and \
                os.path.exists(os.path.join(root, "lib64", "libcudart_static.a")):
            return root
    raise MissingDependency(
        "RINGD_WITH_CUDA=%s but no CUDA toolkit with nvcc and the static runtime "
        "(lib64/libcudart_static.a) was found in %s; set RINGD_WITH_CUDA=/path/to/cuda, "
        "or leave it unset for a build without CUDA kernels"
        % (asked, ", ".join(c for c in candidates if c) or "/usr/local/cuda or $PATH"))
