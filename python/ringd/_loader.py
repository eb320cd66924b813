"""Loading the extension so that libringd calls its own OpenSSL, whatever else is loaded.

TensorFlow loads its libraries with RTLD_GLOBAL, and libtensorflow_framework exports
BoringSSL under OpenSSL's names (EVP_CipherInit_ex, HMAC, RAND_bytes, ...), unversioned,
so they satisfy libringd's OPENSSL_3.0.0 references: imported after TensorFlow, ringd's
handshake ran BoringSSL's functions on OpenSSL's objects and crashed (SIGSEGV in init).
RTLD_DEEPBIND puts the extension's own dependencies (libringd, libcrypto, ...) ahead of
the global scope for its lookups, whichever is imported first and whenever a function is
first called. Not under AddressSanitizer, whose runtime refuses RTLD_DEEPBIND (its
interceptors must see every malloc); there TensorFlow and ringd do not mix.
"""
import ctypes
import importlib
import os
import sys


def _sanitized():
    try:
        return hasattr(ctypes.CDLL(None), "__asan_init")
    except OSError:  # pragma: no cover
        return False


def load_extension():
    deep = getattr(os, "RTLD_DEEPBIND", 0)
    if not deep or _sanitized():
        return importlib.import_module("ringd._ringd")
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | deep)
    try:
        return importlib.import_module("ringd._ringd")
    finally:
        sys.setdlopenflags(flags)
