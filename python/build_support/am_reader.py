"""Read the variables of ringd's automake files, so that the Python build
compiles exactly what `make` compiles: one list of sources, kept in
Makefile.am and the fragments it includes, never copied here.

Only what this build needs is understood: `NAME = words`, `NAME += words`,
backslash continuations, `##`/`#` comments, `include FILE`, and
`if COND` / `else` / `endif`. Rule lines (targets and their tab-indented
recipes) are skipped. A `$(VAR)` or `@VAR@` that is neither set in the
automake files nor given by the caller (configure's substitutions) is an
error, so a new configure variable cannot be silently left out of the wheel.
"""

import os
import re

_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(\+?=)\s*(.*)$")
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|@([A-Za-z_][A-Za-z0-9_]*)@")


class AutomakeError(Exception):
    """The automake files say something this reader does not understand."""


class Automake:
    """The variables of Makefile.am (and what it includes) under the given
    automake conditionals, e.g. {"HAVE_VERBS": True}; a conditional not named
    is false, as configure leaves it when its feature is off."""

    def __init__(self, top_srcdir, conditions, substitutions):
        self.top = top_srcdir
        self.conditions = dict(conditions)
        self.subst = dict(substitutions)
        self.vars = {}
        self.files = []  # every automake file read: the sdist and the rebuild check need them
        self._read("Makefile.am")

    # ---- reading ----
    def _logical_lines(self, rel):
        path = os.path.join(self.top, rel)
        try:
            with open(path, encoding="utf-8") as f:
                raw = f.read().split("\n")
        except OSError as e:
            raise AutomakeError("cannot read %s: %s" % (path, e.strerror)) from None
        self.files.append(rel)
        line, start = "", 0
        for number, text in enumerate(raw, 1):
            if not line:
                start = number
            if text.endswith("\\"):
                line += text[:-1] + " "
                continue
            yield start, line + text
            line = ""
        if line:
            yield start, line

    def _read(self, rel):
        stack = []  # one entry per open `if`: is this branch taken?
        for number, line in self._logical_lines(rel):
            where = "%s:%d" % (rel, number)
            if line.startswith("\t"):
                continue  # a recipe
            stripped = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if not stripped:
                continue
            word = stripped.split()[0]
            if word == "if":
                cond = stripped.split()[1]
                negate = cond.startswith("!")
                value = bool(self.conditions.get(cond.lstrip("!"), False))
                stack.append(value != negate)
                continue
            if word == "else":
                if not stack:
                    raise AutomakeError("%s: else without if" % where)
                stack[-1] = not stack[-1]
                continue
            if word == "endif":
                if not stack:
                    raise AutomakeError("%s: endif without if" % where)
                stack.pop()
                continue
            if not all(stack):
                continue
            if word == "include":
                target = stripped.split(None, 1)[1].replace("$(srcdir)/", "")
                self._read(target)
                continue
            m = _ASSIGN.match(stripped)
            if m:
                name, op, value = m.groups()
                if op == "+=" and name in self.vars:
                    self.vars[name] = self.vars[name] + " " + value
                else:
                    self.vars[name] = value
            # anything else is a rule (`target: deps`): not ours
        if stack:
            raise AutomakeError("%s: `if` without `endif`" % rel)

    # ---- expanding ----
    def expand(self, text, _depth=0):
        if _depth > 20:
            raise AutomakeError("variables refer to each other in a loop: %s" % text)

        def one(m):
            name = m.group(1) or m.group(2)
            if name in self.subst:
                return self.subst[name]
            if name in self.vars:
                return self.expand(self.vars[name], _depth + 1)
            raise AutomakeError("$(%s) is used by the automake files but this build does "
                                "not know its value (python/build_support: add it to the "
                                "configure substitutions)" % name)

        return _REF.sub(one, text)

    def words(self, name, default=None):
        """The expanded words of variable `name` (a KeyError-like error when
        it is unset and no default is given)."""
        if name not in self.vars:
            if default is not None:
                return list(default)
            raise AutomakeError("Makefile.am does not set %s" % name)
        return self.expand(self.vars[name]).split()

    def has(self, name):
        return name in self.vars


def canonical(target):
    """Automake's canonical name of a target: python/_ringd.la -> python__ringd_la."""
    return re.sub(r"[^A-Za-z0-9_]", "_", target)
