"""Bad marker arguments in the user's words (pure).

pydantic words an error for its model ("Input should be a valid tuple", "Extra inputs are not
permitted"); a test author wrote a keyword argument. Here each bad argument becomes one line
that quotes it as written (``gate='metrics.ttft_ms.p99'``), says what it takes in plain words
(``a list of strings``, with the fix when the value only needs brackets), and, for a name that
does not exist, the name that probably was meant (difflib) or the percentile SLO's right form.
"""

from __future__ import annotations

import difflib
import re
import textwrap
import types
from typing import Any, Literal, Mapping, Optional, Sequence, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from pytest_goodput.schema.registry import LATENCIES, PERCENTILE_SLO_RE

#: How a percentile SLO keyword is written, for lists of valid names.
PERCENTILE_SLO_FORM = f"<{'|'.join(LATENCIES)}>_p<P>_ms"
#: pydantic error types that mean "not the right kind of value" (said in words here).
_KIND_ERRORS = ("literal_error", "int_from_float", "enum")
_WORDS: dict[Any, tuple[str, str]] = {  # type -> (one, several)
    bool: ("True or False", "True/False values"),
    int: ("a whole number", "whole numbers"),
    float: ("a number", "numbers"),
    str: ("a string", "strings"),
}


def type_words(annotation: Any) -> str:
    """A field's type as a test author would say it: ``a list of numbers``, ``one of 'a', 'b'``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Union or origin is types.UnionType:
        return " or ".join(dict.fromkeys(type_words(a) for a in args if a is not type(None)))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is tuple:
        return f"a list of {_WORDS.get(args[0], ('', 'values'))[1]}"
    if origin is dict:
        return f"a dict of {'names' if args[0] is str else 'keys'} to {_WORDS.get(args[1], ('', 'values'))[1]}"
    if annotation in _WORDS:
        return _WORDS[annotation][0]
    return getattr(annotation, "__name__", str(annotation))


def _is_kind_error(kind: str) -> bool:
    return kind.endswith(("_type", "_parsing")) or kind in _KIND_ERRORS


def _got(value: Any) -> str:
    """The value given, with its kind when that is what is wrong (``the string '8'``)."""
    kinds = {str: "the string", bool: "the boolean", int: "the number", float: "the number",
             list: "the list", tuple: "the list", dict: "the dict"}
    kind = kinds.get(type(value))
    return f"{kind} {value!r}" if kind else repr(value)


def percentile_slo_form(name: str) -> Optional[str]:
    """The percentile SLO keyword a misspelt one meant (``ttft_ms_p99`` -> ``ttft_p99_ms``)."""
    key = name.lower()
    metric = next((m for m in sorted(LATENCIES, key=len, reverse=True)
                   if re.search(rf"(?:^|_){m}(?:_|$)", key)), None)
    pct = re.search(r"(?:^|_)p(\d+(?:\.\d+)?)(?:_|$)", key)
    if metric is None or pct is None:
        return None
    form = f"{metric}_p{pct.group(1)}_ms"
    return form if form != name and PERCENTILE_SLO_RE.match(form) else None


def unknown_argument(name: str, value: Any, valid: Sequence[str]) -> str:
    """Why ``name=value`` is refused, with the name meant or the valid names."""
    said = f"{name}={value!r}: unknown argument"
    slo = percentile_slo_form(name)
    if slo is not None:
        return (f"{said}; a percentile SLO is written <metric>_p<percentile>_ms: did you mean "
                f"{slo}={value!r}?")
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    names = textwrap.fill(", ".join([*sorted(valid), PERCENTILE_SLO_FORM]), width=96,
                          initial_indent="      ", subsequent_indent="      ", break_on_hyphens=False)
    hint = f"; did you mean {close[0]}=?" if close else ""
    return f"{said}{hint}\n    valid arguments (docs/markers.md):\n{names}"


def wrong_kind(name: str, value: Any, model: type[BaseModel], errors: list[dict]) -> str:
    """``name=value`` is not the kind of value the argument takes: say which kind, and the fix
    when a single value only needs to be a list."""
    field = model.model_fields[name]
    wanted = type_words(field.annotation)
    line = f"{name}={value!r}: {name}= takes {wanted}, not {_got(value)}"
    literal = _literal_values(field.annotation)
    close = difflib.get_close_matches(value, literal, n=1) if literal and isinstance(value, str) else []
    if close:
        return f"{line}; did you mean {name}={close[0]!r}?"
    if wanted.startswith("a list of") and not isinstance(value, (list, tuple)):
        return f"{line}; write {name}=[{value!r}]"
    items = [e for e in errors if len(e["loc"]) > 1 and isinstance(e["loc"][-1], int)]
    item = _item_type(field.annotation)
    if items and item in _WORDS:
        e = items[0]
        return f"{line}: item {e['loc'][-1] + 1}, {_got(e['input'])}, is not {_WORDS[item][0]}"
    return line


def quoted_numbers(given: Mapping[str, Any], model: type[BaseModel]) -> list[tuple[str, str]]:
    """``rate="8"``: a number or a True/False written as a string. pydantic would read it, but a
    marker is Python, where quotes mean text: an argument that looks right and is not is refused
    rather than guessed at. Per argument, its name and a line with the value as it should be
    written (text that is no number is left to the type check, which says so)."""
    lines = []
    for name, value in given.items():
        field = model.model_fields.get(name)
        if field is None and isinstance(name, str) and PERCENTILE_SLO_RE.match(name):
            words = "a number"
        elif field is None or _takes_strings(field.annotation):
            continue
        else:
            words = type_words(field.annotation)
        items = value if isinstance(value, (list, tuple)) else [value]
        texts = [v for v in items if isinstance(v, str) and not isinstance(_unquoted(v), str)]
        if not texts:
            continue
        fixed = [_unquoted(v) if isinstance(v, str) else v for v in items]
        shown = fixed if isinstance(value, (list, tuple)) else fixed[0]
        lines.append((name, f"{name}={value!r}: {name}= takes {words}, not {_got(texts[0])} (a "
                            f"quoted value is text); write {name}={shown!r}"))
    return lines


def _takes_strings(annotation: Any) -> bool:
    """Whether a field accepts text of its own (a name, a path, one of some words)."""
    if annotation is str or get_origin(annotation) is Literal:
        return True
    return any(_takes_strings(a) for a in get_args(annotation))


def _unquoted(text: str) -> Any:
    """``"8"`` as it was meant: 8, 8.5, True; text that is no number stays as it is."""
    if text.strip() in ("True", "False", "true", "false"):
        return text.strip().lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _literal_values(annotation: Any) -> list[str]:
    """The strings a ``Literal`` field (``Optional`` or not) allows."""
    if get_origin(annotation) is Literal:
        return [a for a in get_args(annotation) if isinstance(a, str)]
    return [v for a in get_args(annotation) for v in _literal_values(a)]


def _item_type(annotation: Any) -> Any:
    """The item type of the list a field takes (through ``Optional`` and unions), or None."""
    if get_origin(annotation) is tuple:
        return get_args(annotation)[0]
    return next((t for a in get_args(annotation) if (t := _item_type(a)) is not None), None)


def explain(err: ValidationError, where: str, model: type[BaseModel], given: Mapping[str, Any],
            valid: Sequence[str], fields_only: bool = False) -> str:
    """One line per bad argument (a few for an unknown one): where it came from, the argument
    as written, what it takes. ``valid``: every argument name the marker accepts;
    ``fields_only``: leave out rules across arguments."""
    lines: list[str] = []
    by_field: dict[str, list[dict]] = {}
    for e in err.errors():
        top = e["loc"][0] if e["loc"] else None
        if fields_only and top is None:
            continue
        if e["type"] == "extra_forbidden" and isinstance(top, str):
            lines.append("  " + unknown_argument(top, e.get("input"), valid))
        elif isinstance(top, str) and top in model.model_fields and top in given and _is_kind_error(e["type"]):
            by_field.setdefault(top, []).append(e)
        else:
            lines.append("  " + _pydantic_line(e))
    lines += ["  " + wrong_kind(name, given[name], model, errs) for name, errs in by_field.items()]
    names = list(dict.fromkeys(
        (e["loc"][0] for e in err.errors() if e["loc"] and isinstance(e["loc"][0], str))))
    head = f"{where}: invalid goodput arguments" + (f": {', '.join(names)}" if names else "")
    return "\n".join([head, *lines])


def _pydantic_line(e: dict) -> str:
    """A bound or rule error, which pydantic already words plainly (``rate: Input should be
    greater than 0 (got -1)``); a rule across arguments names its arguments itself."""
    loc = ".".join(str(p) for p in e["loc"])
    msg = e["msg"].removeprefix("Value error, ")
    got = e.get("input")
    return msg if not loc else f"{loc}: {msg}" + ("" if isinstance(got, dict) else f" (got {got!r})")
