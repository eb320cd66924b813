"""Input: the CSV tables the tools write (and ring-bench --csv prints) and
ringd's --metrics JSON lines. One reader for each; every error is a
DataError whose text names the file and, where there is one, the line.
Only the standard library: `ring-analyze sweep-run` runs once per run of a
sweep and must start fast.
"""

import json
import math
import re
import sys


class DataError(Exception):
    """Input that cannot be read; str() is the whole sentence."""


class NoRows(DataError):
    """A valid table without data rows, or a selection that is empty (a data
    problem, not bad usage: ring-analyze fit exits 1 for it, not 2)."""


# ---- CSV ----------------------------------------------------------------------


def split_csv_line(line):
    """The fields of one CSV line. Unquoted fields lose their surrounding
    blanks; a quoted field keeps everything between its quotes, with "" read
    as one quote. Raises ValueError with the reason."""
    fields = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i < n and line[i] == '"':
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise ValueError("a quoted field has no closing quote")
                if line[i] == '"':
                    if i + 1 < n and line[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(line[i])
                i += 1
            while i < n and line[i] in " \t":
                i += 1
            if i < n and line[i] != ",":
                raise ValueError("text after a quoted field's closing quote")
            fields.append("".join(buf))
            if i >= n:
                return fields
            i += 1  # the comma
        else:
            j = line.find(",", i)
            end = n if j < 0 else j
            fields.append(line[i:end].rstrip(" \t"))
            if j < 0:
                return fields
            i = j + 1


def read_text(path):
    """A file's text, as lines split at '\\n' only (as C's getline would: a
    lone '\\r' is not a line end); '-' is standard input."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        raise DataError("cannot open %s: %s" % (path, e.strerror)) from None
    return data.decode("utf-8", errors="replace").split("\n")


def iter_csv(lines, name):
    """Yields (line number, fields) for the header line and then every data
    row. Empty lines and lines starting with '#' are skipped; CRLF is fine.
    A malformed line, or a row whose field count differs from the header's,
    is a DataError naming the line."""
    width = None
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        stripped = line.lstrip(" \t")
        if not stripped or stripped.startswith("#"):
            continue
        try:
            fields = split_csv_line(line)
        except ValueError as e:
            raise DataError("%s:%d: malformed CSV: %s" % (name, lineno, e)) from None
        if width is None:
            width = len(fields)
        elif len(fields) != width:
            raise DataError(
                "%s:%d: malformed CSV: %d field%s, but the header has %d"
                % (name, lineno, len(fields), "" if len(fields) == 1 else "s", width)
            )
        yield lineno, fields


class Table:
    """A CSV table read whole: .header (names), .rows ([(line, fields)])."""

    def __init__(self, name, header, rows):
        self.name, self.header, self.rows = name, header, rows

    def col(self, column):
        """The index of column (the first of that name); DataError without it."""
        try:
            return self.header.index(column)
        except ValueError:
            raise DataError("%s: the header has no column '%s'" % (self.name, column)) from None

    def records(self, *columns):
        """[(line, {column: text})] for the named columns (all when none)."""
        idx = [(c, self.col(c)) for c in (columns or self.header)]
        return [(line, {c: f[i] for c, i in idx}) for line, f in self.rows]


def read_csv(path, name=None):
    """The whole table in path (DataError when it is empty or malformed)."""
    name = name or path
    it = iter_csv(read_text(path), name)
    first = next(it, None)
    if first is None:
        raise DataError("%s: empty (no header line)" % name)
    return Table(name, first[1], list(it))


_NUMBER = re.compile(r"[ \t\n\v\f\r]*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


def parse_number(text):
    """A finite decimal number (as C's strtod reads one, whole), else ValueError."""
    if not _NUMBER.match(text):
        raise ValueError(text)
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(text)
    return v


def whole(text, name, line, column):
    """A field that must be a whole number >= 0, as an int; DataError naming
    the line and column otherwise."""
    if not text.isdigit():
        raise DataError("%s:%d: %s is '%s', not a whole number" % (name, line, column, text))
    return int(text)


def number_or_none(text):
    """parse_number, or None for an empty or non-numeric field."""
    try:
        return parse_number(text)
    except ValueError:
        return None


# ---- ring-bench --csv output ----------------------------------------------------

_LAUNCH_PREFIX = re.compile(r"^\[\d+\] ")


def bench_rows(path):
    """The result rows of ring-bench --csv output (its header starts with
    'bytes,count'), as dicts of text; ring-launch's '[RANK] ' prefixes and
    lines that are not part of the table (messages) are left out. [] when
    the file holds no table; DataError when it cannot be read."""
    header, rows = None, []
    for raw in read_text(path):
        line = _LAUNCH_PREFIX.sub("", raw.rstrip("\r\n"), count=1)
        try:
            fields = split_csv_line(line)
        except ValueError:
            continue
        if fields[:2] == ["bytes", "count"]:
            header = fields
        elif header and len(fields) >= 7 and fields[0].isdigit():
            rows.append(dict(zip(header, fields)))
    return rows


# ---- ringd --metrics JSON lines ---------------------------------------------------

# ringd prints a diverged loss with C's %g ("nan", "inf"), which JSON lacks
_NONFINITE = re.compile(r"(?<=:)(-?)(nan|inf)(?=[,}])")
_JSON_WORD = {"nan": "NaN", "inf": "Infinity"}


def _clip(line, width=80):
    return line if len(line) <= width else line[: width - 3] + "..."


def read_jsonl(path):
    """[(line number, object)] of a JSON-lines file such as ringd --metrics
    writes. Empty lines are skipped. The last line may be cut off (no
    newline after it: a peer stopped while writing); if it does not parse it
    is left out. Any other line that is not a JSON object is a DataError
    naming the file and line."""
    lines = read_text(path)
    out = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        text = _NONFINITE.sub(lambda m: ("-" if m.group(1) and m.group(2) == "inf" else "")
                              + _JSON_WORD[m.group(2)], line)
        try:
            rec = json.loads(text)
        except ValueError as e:
            if lineno == len(lines):
                break  # cut off
            raise DataError(
                "%s:%d: not JSON (%s at column %d): %s"
                % (path, lineno, getattr(e, "msg", e), getattr(e, "colno", 0), _clip(line))
            ) from None
        if not isinstance(rec, dict):
            raise DataError("%s:%d: not a JSON object: %s" % (path, lineno, _clip(line)))
        out.append((lineno, rec))
    return out


def number_field(rec, key, path, lineno):
    """rec[key] as a float; a DataError naming the line when it is missing
    or not a number."""
    v = rec.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        what = "missing" if key not in rec else "%s, not a number" % json.dumps(v)
        raise DataError(
            "%s:%d: a '%s' record's '%s' is %s" % (path, lineno, rec.get("type", "?"), key, what)
        )
    return float(v)
