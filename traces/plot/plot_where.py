"""`--where EXPR`: a row filter in the syntax of a sweep's `require` (sim/sweep/expr.h).

Operands: numbers, "strings" (or 'strings'), and column names of the sweep store (field
paths such as workload.seq_len, metrics such as prefill_ps, status). Operators, loosest
first: ||, &&, == !=, < <= > >=, + -, * / %, unary ! and -. A comparison is 1 or 0. A
NULL column (a metric of a failed point) makes any comparison false. Ordering a number
against a string is an error; == and != between them are simply false and true.
"""

import math
import re

from plot_common import UsageError, num

TOKEN = re.compile(r"""\s*(?:
    (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<str>"[^"]*"|'[^']*')
  | (?P<id>[A-Za-z_][A-Za-z0-9_.\[\]]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>+\-*/%!()])
)""", re.VERBOSE)

BINARY = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4,
          "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}


def tokenize(text):
    out, i = [], 0
    while i < len(text):
        if text[i:].strip() == "":
            break
        m = TOKEN.match(text, i)
        if not m or m.end() == i:
            raise UsageError(f"--where {text!r}: col {i + 1}: cannot read {text[i:].strip()[:12]!r}")
        kind = m.lastgroup
        start = m.start(kind)
        out.append((kind, m.group(kind), start + 1))
        i = m.end()
    out.append(("end", "", len(text) + 1))
    return out


def _truth(v):
    if v is None:
        return False
    if isinstance(v, str):
        raise UsageError(f"--where: the string {v!r} is not a truth value")
    return v != 0 and not math.isnan(v)


def _compare(op, a, b):
    if a is None or b is None:
        return 0.0
    if isinstance(a, str) != isinstance(b, str):
        if op in ("==", "!="):
            return float(op == "!=")
        raise UsageError(f"--where: cannot order {a!r} against {b!r}")
    return float({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                  ">=": a >= b}[op])


def _arith(op, a, b):
    if a is None or b is None:
        return None
    if isinstance(a, str) or isinstance(b, str):
        raise UsageError(f"--where: {op} needs numbers, got {a!r} and {b!r}")
    if op in "/%" and b == 0:
        return math.nan
    return {"+": a + b, "-": a - b, "*": a * b, "/": a / b, "%": math.fmod(a, b)}[op]


class Where:
    """Parsed once; `holds(row)` for a row given as {column: value}."""

    def __init__(self, text, columns):
        self.text = text
        self.columns = list(columns)
        self.fields = []
        self.toks = tokenize(text)
        self.pos = 0
        self.fn = self._expr(0)
        kind, val, col = self.toks[self.pos]
        if kind != "end":
            raise UsageError(f"--where {text!r}: col {col}: unexpected {val!r}")

    def _next(self):
        t = self.toks[self.pos]
        self.pos += 1
        return t

    def _primary(self):
        kind, val, col = self._next()
        if kind == "num":
            v = num(val, f"--where {self.text!r}: col {col}")
            return lambda row: v
        if kind == "str":
            s = val[1:-1]
            return lambda row: s
        if kind == "id":
            if val not in self.columns:
                raise UsageError(f"--where {self.text!r}: col {col}: no column {val!r} "
                                 f"(columns: {', '.join(self.columns)})")
            self.fields.append(val)
            return lambda row: row.get(val)
        if kind == "op" and val == "(":
            inner = self._expr(0)
            k, v, c = self._next()
            if v != ")":
                raise UsageError(f"--where {self.text!r}: col {c}: expected ')'")
            return inner
        if kind == "op" and val in ("!", "-"):
            operand = self._primary()
            if val == "!":
                return lambda row: float(not _truth(operand(row)))
            return lambda row: _arith("-", 0.0, operand(row))
        what = "the end" if kind == "end" else repr(val)
        raise UsageError(f"--where {self.text!r}: col {col}: expected a value, found {what}")

    def _expr(self, min_prec):
        left = self._primary()
        while True:
            kind, op, col = self.toks[self.pos]
            prec = BINARY.get(op) if kind == "op" else None
            if prec is None or prec <= min_prec:
                return left
            self.pos += 1
            right = self._expr(prec)
            left = self._combine(op, left, right)

    @staticmethod
    def _combine(op, a, b):
        if op == "||":
            return lambda row: float(_truth(a(row)) or _truth(b(row)))
        if op == "&&":
            return lambda row: float(_truth(a(row)) and _truth(b(row)))
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return lambda row: _compare(op, a(row), b(row))
        return lambda row: _arith(op, a(row), b(row))

    def holds(self, row):
        return _truth(self.fn(row))
