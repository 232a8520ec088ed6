"""GitHub Actions' ``${{ }}`` expression language, the subset shipped workflows use.

Literals, context paths (``github.event.pull_request.number``, ``steps.cache.outputs.x``),
``! == != < <= > >= && || ( )``, and the functions ``success() failure() cancelled()
always() hashFiles()``. Semantics follow GitHub's documentation: ``&&``/``||`` return an
operand, ``==`` compares strings case-insensitively and otherwise coerces both sides to
numbers (so ``null == ''`` holds). Anything else — an unknown context, property of a context
the emulator does not model, or function — raises, so a workflow that needs more than this
fails its test instead of skipping a step.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|"
                   r"(?P<op>==|!=|<=|>=|&&|\|\||[!<>().,\[\]])|(?P<name>[A-Za-z_][A-Za-z0-9_-]*))")
STATUS_FUNCTIONS = ("success", "failure", "cancelled", "always")


def open_context(where: str) -> bool:
    """Where a missing property is null, as on GitHub: the event payload, a step's outputs and
    ``env``. Elsewhere (``github.<name>``, ``steps.<id>``) it is a gap in the emulation."""
    parts = where.split(".")
    return (parts[0] == "env" or parts[:2] == ["github", "event"]
            or (parts[0] == "steps" and len(parts) >= 3 and parts[2] == "outputs"))


class ExpressionError(Exception):
    """An expression this emulator does not understand."""


def tokenize(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = TOKEN.match(text, pos)
        if not m:
            raise ExpressionError(f"cannot read {text[pos:]!r} in {text!r}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def to_number(v: Any) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        if v.strip() == "":
            return 0.0
        try:
            return float(v)
        except ValueError:
            return math.nan
    return math.nan


def truthy(v: Any) -> bool:
    if isinstance(v, float) and math.isnan(v):
        return False
    return isinstance(v, (dict, list)) or v not in (None, False, 0, "")


def equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if type(a) is type(b) and isinstance(a, (dict, list)):
        return a is b
    return to_number(a) == to_number(b)


def to_string(v: Any) -> str:
    """How ``${{ }}`` interpolation prints a value."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v)
    return str(v)


class Evaluator:
    """Evaluates expressions against contexts; ``status`` answers the status functions."""

    def __init__(self, contexts: Mapping[str, Any], workspace: Path,
                 status: Callable[[str], bool] = lambda name: name in ("success", "always")):
        self.contexts = contexts
        self.workspace = workspace
        self.status = status

    def evaluate(self, text: str) -> Any:
        self.tokens, self.i, self.source = tokenize(text), 0, text
        value = self._or()
        if self.i != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.i][1]!r} in {text!r}")
        return value

    def interpolate(self, text: str) -> str:
        """Every ``${{ expr }}`` in a string replaced by its value."""
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: to_string(self.evaluate(m.group(1))), text, flags=re.DOTALL)

    def condition(self, text: str | None) -> bool:
        """An ``if:``: bare or wrapped in ``${{ }}``; without a status function it is
        ``success() && (...)``, as on GitHub."""
        if text is None:
            return self.status("success")
        expr = str(text).strip()
        m = re.fullmatch(r"\$\{\{(.*)\}\}", expr, flags=re.DOTALL)
        expr = m.group(1) if m else expr
        if "${{" in expr:
            raise ExpressionError(f"mixed literal and expression in if: {text!r}")
        if not any(re.search(rf"\b{f}\s*\(", expr) for f in STATUS_FUNCTIONS):
            expr = f"success() && ({expr})"
        return truthy(self.evaluate(expr))

    # --- the grammar ----------------------------------------------------------------------
    def _peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def _take(self, want: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.tokens):
            raise ExpressionError(f"unexpected end of {self.source!r}")
        tok = self.tokens[self.i]
        if want is not None and tok[1] != want:
            raise ExpressionError(f"expected {want!r}, got {tok[1]!r} in {self.source!r}")
        self.i += 1
        return tok

    def _or(self) -> Any:
        left = self._and()
        while self._peek() == "||":
            self._take()
            right = self._and()
            left = left if truthy(left) else right
        return left

    def _and(self) -> Any:
        left = self._eq()
        while self._peek() == "&&":
            self._take()
            right = self._eq()
            left = right if truthy(left) else left
        return left

    def _eq(self) -> Any:
        left = self._cmp()
        while self._peek() in ("==", "!="):
            op = self._take()[1]
            right = self._cmp()
            left = equal(left, right) == (op == "==")
        return left

    def _cmp(self) -> Any:
        left = self._unary()
        while self._peek() in ("<", "<=", ">", ">="):
            op = self._take()[1]
            a, b = to_number(left), to_number(self._unary())
            left = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return left

    def _unary(self) -> Any:
        if self._peek() == "!":
            self._take()
            return not truthy(self._unary())
        return self._primary()

    def _primary(self) -> Any:
        kind, text = self._take()
        if text == "(" and kind == "op":
            value = self._or()
            self._take(")")
            return value
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r} in {self.source!r}")
        if text in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text]
        if self._peek() == "(":
            return self._call(text)
        return self._path(text)

    def _call(self, name: str) -> Any:
        self._take("(")
        args = []
        while self._peek() != ")":
            args.append(self._or())
            if self._peek() == ",":
                self._take()
        self._take(")")
        if name in STATUS_FUNCTIONS:
            if args:
                raise ExpressionError(f"{name}() takes no arguments")
            return self.status(name)
        if name == "hashFiles":
            return self._hash_files([str(a) for a in args])
        raise ExpressionError(f"function {name}() is not emulated (in {self.source!r})")

    def _path(self, root: str) -> Any:
        if root not in self.contexts:
            raise ExpressionError(f"context {root!r} is not emulated (in {self.source!r})")
        value, where = self.contexts[root], root
        while self._peek() in (".", "["):
            if self._take()[1] == ".":
                key = self._take()[1]
            else:
                key = to_string(self._or())
                self._take("]")
            if isinstance(value, dict) and key in value:
                value = value[key]
            elif value is None or open_context(f"{where}.{key}"):
                value = None
            else:
                raise ExpressionError(f"{where}.{key} is not emulated (in {self.source!r})")
            where = f"{where}.{key}"
        return value

    def _hash_files(self, patterns: list[str]) -> str:
        files = sorted({p for pat in patterns for p in self.workspace.glob(pat) if p.is_file()})
        if not files:
            return ""
        h = hashlib.sha256()
        for f in files:
            h.update(hashlib.sha256(f.read_bytes()).digest())
        return h.hexdigest()
