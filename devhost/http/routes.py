"""Route templates of HTTP triggers, matched the way ASP.NET Core routing (used by the Functions host) matches them.

Supported: literal segments (case-insensitive), `{name}`, optional `{name?}`, defaults `{name=value}`, catch-all
`{*rest}` / `{**rest}`, complex segments such as `{file}.{ext}`, and inline constraints chained with `:`
(`{id:int}`, `{n:range(1,9)}`, `{s:regex(^a+$)}`, ...). Pure code: no I/O, no aiohttp.
"""

from __future__ import annotations

import re
import string
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Generic, TypeVar

__all__ = ["RouteTable", "RouteTemplate", "RouteTemplateError"]

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


class RouteTemplateError(ValueError):
    """A route template that ASP.NET Core would reject."""


def _parse_int(text: str, bounds: tuple[int, int]) -> int | None:
    if not re.fullmatch(r"[+-]?\d+", text.strip()):
        return None
    value = int(text)
    return value if bounds[0] <= value <= bounds[1] else None


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
    except InvalidOperation:
        return False
    return text.strip().lower() not in {"nan", "infinity", "-infinity", "+infinity", "inf", "-inf", "+inf"}


def _is_datetime(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _is_guid(text: str) -> bool:
    try:
        uuid.UUID(text.strip("{}()"))
    except ValueError:
        return False
    return True


def _int_args(args: Sequence[str], count: int, name: str) -> list[int]:
    if len(args) != count:
        raise RouteTemplateError(f"constraint '{name}' takes {count} argument(s)")
    try:
        return [int(a) for a in args]
    except ValueError as exc:
        raise RouteTemplateError(f"constraint '{name}' needs integer arguments") from exc


Constraint = Callable[[str], bool]


def _build_constraint(name: str, args: list[str]) -> Constraint:
    """One inline constraint (names are case-insensitive, as in ASP.NET Core's DefaultInlineConstraintResolver)."""
    key = name.lower()
    simple: dict[str, Constraint] = {
        "int": lambda v: _parse_int(v, INT32) is not None,
        "long": lambda v: _parse_int(v, INT64) is not None,
        "bool": lambda v: v.lower() in {"true", "false"},
        "guid": _is_guid,
        "datetime": _is_datetime,
        "decimal": _is_number,
        "double": _is_number,
        "float": _is_number,
        "alpha": lambda v: re.fullmatch(r"[a-zA-Z]+", v) is not None,
        "required": lambda v: v != "",
        "file": lambda v: "." in v.rsplit("/", 1)[-1].strip("."),
        "nonfile": lambda v: "." not in v.rsplit("/", 1)[-1].strip("."),
    }
    if key in simple:
        if args:
            raise RouteTemplateError(f"constraint '{name}' takes no arguments")
        return simple[key]
    if key == "regex":
        pattern = re.compile(",".join(args), re.IGNORECASE)
        return lambda v: pattern.search(v) is not None
    if key in {"minlength", "maxlength"}:
        (limit,) = _int_args(args, 1, name)
        return (lambda v: len(v) >= limit) if key == "minlength" else (lambda v: len(v) <= limit)
    if key == "length":
        bounds = _int_args(args, len(args) if len(args) in (1, 2) else 2, name)
        low, high = (bounds[0], bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
        return lambda v: low <= len(v) <= high
    if key in {"min", "max", "range"}:
        bounds = _int_args(args, 2 if key == "range" else 1, name)
        low = bounds[0] if key in {"min", "range"} else INT64[0]
        high = bounds[-1] if key in {"max", "range"} else INT64[1]

        def in_range(v: str) -> bool:
            number = _parse_int(v, INT64)
            return number is not None and low <= number <= high

        return in_range
    raise RouteTemplateError(f"unknown route constraint '{name}'")


@dataclass(frozen=True)
class _Param:
    name: str
    optional: bool = False
    default: str | None = None
    catch_all: bool = False
    constraints: tuple[Constraint, ...] = ()
    constraint_names: tuple[str, ...] = ()

    def accepts(self, value: str) -> bool:
        return all(check(value) for check in self.constraints)


def _split_constraints(body: str) -> tuple[str, list[str]]:
    """`id:int:range(1,5)` -> ("id", ["int", "range(1,5)"]); colons inside parentheses belong to the argument."""
    parts: list[str] = []
    depth, current = 0, ""
    for char in body:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == ":" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return parts[0], parts[1:]


def _parse_param(body: str) -> _Param:
    catch_all = body.startswith("*")
    body = body.lstrip("*")
    default: str | None = None
    head, raw_constraints = _split_constraints(body)
    if raw_constraints and "=" in raw_constraints[-1]:
        raw_constraints[-1], default = raw_constraints[-1].split("=", 1)
    elif "=" in head:
        head, default = head.split("=", 1)
    optional = False
    if raw_constraints and raw_constraints[-1].endswith("?"):
        raw_constraints[-1], optional = raw_constraints[-1][:-1], True
    elif head.endswith("?"):
        head, optional = head[:-1], True
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", head):
        raise RouteTemplateError(f"invalid route parameter name '{head}'")
    constraints: list[Constraint] = []
    names: list[str] = []
    for raw in raw_constraints:
        match = re.fullmatch(r"([A-Za-z]+)(?:\((.*)\))?", raw, re.DOTALL)
        if not match:
            raise RouteTemplateError(f"invalid constraint '{raw}' on parameter '{head}'")
        name, arg_text = match.group(1), match.group(2)
        args = [] if arg_text is None else ([arg_text] if name.lower() == "regex" else arg_text.split(","))
        constraints.append(_build_constraint(name, args))
        names.append(raw)
    return _Param(head, optional or catch_all, default, catch_all, tuple(constraints), tuple(names))


@dataclass(frozen=True)
class _Segment:
    """One `/`-separated segment: literal text and parameters, compiled to an anchored regex."""

    parts: tuple[str | _Param, ...]
    pattern: re.Pattern[str] = field(compare=False)
    # Read on every match: derived from `parts` once.
    params: tuple[_Param, ...] = field(init=False, compare=False)
    lone_param: _Param | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        parts = self.parts
        object.__setattr__(self, "params", tuple(p for p in parts if isinstance(p, _Param)))
        object.__setattr__(self, "lone_param", parts[0] if len(parts) == 1 and isinstance(parts[0], _Param) else None)

    @property
    def is_literal(self) -> bool:
        return not self.params

    def precedence(self) -> int:
        """ASP.NET Core RoutePrecedence: lower sorts first (literal, complex, constrained, plain, catch-all)."""
        if self.is_literal:
            return 1
        lone = self.lone_param
        if lone is None:
            return 2
        if lone.catch_all:
            return 5
        return 3 if lone.constraints else 4

    @property
    def may_be_absent(self) -> bool:
        """A trailing segment a path may leave out: a lone optional (or catch-all) or defaulted parameter."""
        lone = self.lone_param
        return lone is not None and (lone.optional or lone.default is not None)


def _parse_segment(text: str) -> _Segment:
    parts: list[str | _Param] = []
    regex = ""
    position = 0
    for match in re.finditer(r"\{([^{}]*)\}", text):
        literal = text[position : match.start()]
        if literal:
            parts.append(literal)
            regex += re.escape(literal)
        param = _parse_param(match.group(1))
        if parts and isinstance(parts[-1], _Param):
            raise RouteTemplateError(f"segment '{text}' has two parameters with no literal between them")
        parts.append(param)
        # Greedy groups reproduce ASP.NET's right-to-left matching of complex segments: {a}.{b} on x.y.z -> x.y, z.
        regex += f"(?P<{param.name}>.+)"
        position = match.end()
    tail = text[position:]
    if "{" in tail or "}" in tail:
        raise RouteTemplateError(f"unbalanced braces in route segment '{text}'")
    if tail:
        parts.append(tail)
        regex += re.escape(tail)
    return _Segment(tuple(parts), re.compile(f"^{regex}$", re.IGNORECASE | re.DOTALL))


class RouteTemplate:
    """A parsed route template; `match(path)` returns route values (strings) or None."""

    def __init__(self, template: str) -> None:
        self.template = template
        text = template.strip().strip("/")
        if text.startswith("~"):
            text = text.lstrip("~").strip("/")
        self.segments = [_parse_segment(s) for s in text.split("/")] if text else []
        names = [p.name.lower() for s in self.segments for p in s.params]
        if len(names) != len(set(names)):
            raise RouteTemplateError(f"route '{template}' repeats a parameter name")
        for index, segment in enumerate(self.segments):
            for param in segment.params:
                if param.catch_all and (index != len(self.segments) - 1 or segment.lone_param is None):
                    raise RouteTemplateError(f"catch-all parameter '{param.name}' must be the whole last segment")
                if param.optional and not param.catch_all and segment.lone_param is None:
                    raise RouteTemplateError(f"optional parameter '{param.name}' must be alone in its segment")
        # How many path segments can match at all (`match` checks this first: a table tries most templates in vain).
        required = len(self.segments)
        while required and self.segments[required - 1].may_be_absent:
            required -= 1
        last = self.segments[-1].lone_param if self.segments else None
        self._fewest = required
        self._most = None if last is not None and last.catch_all else len(self.segments)

    def precedence_key(self) -> tuple[int, ...]:
        return tuple(s.precedence() for s in self.segments)

    def match(self, path: str, *, decode: bool = True) -> dict[str, str] | None:
        """Route values of `path`, or None. `decode=False` when the caller already URL-decoded the whole path."""
        return self.match_segments(path_segments(path, decode=decode))

    def match_segments(self, texts: Sequence[str]) -> dict[str, str] | None:
        """`match` of a path already split by `path_segments` (a table splits each path once for all templates)."""
        count = len(texts)
        if count < self._fewest or (self._most is not None and count > self._most):
            return None
        values: dict[str, str] = {}
        for index, segment in enumerate(self.segments):
            lone = segment.lone_param
            if lone is not None and lone.catch_all:
                rest = "/".join(texts[index:])
                return values if self._bind(lone, rest, values, allow_empty=True) else None
            if index >= count:
                return values if self._fill_missing(self.segments[index:], values) else None
            found = segment.pattern.match(texts[index])
            if found is None:
                return None
            for param in segment.params:
                if not self._bind(param, found.group(param.name), values, allow_empty=False):
                    return None
        return values

    @staticmethod
    def _bind(param: _Param, value: str, values: dict[str, str], *, allow_empty: bool) -> bool:
        if value == "":
            if not allow_empty:
                return False
            if param.default is not None:
                values[param.name] = param.default
            return True
        if not param.accepts(value):
            return False
        values[param.name] = value
        return True

    @staticmethod
    def _fill_missing(segments: Iterable[_Segment], values: dict[str, str]) -> bool:
        """Trailing segments absent from the path must all be optional or defaulted lone parameters."""
        for segment in segments:
            lone = segment.lone_param
            if lone is None or not segment.may_be_absent:
                return False
            if lone.default is not None:
                values[lone.name] = lone.default
        return True


def path_segments(path: str, *, decode: bool = True) -> list[str]:
    """The `/`-separated segments of `path` (outer slashes ignored), each URL-decoded unless `decode` is False.

    Decoded as Kestrel decodes Request.Path, from which ASP.NET routing takes the route values the host gives the
    worker: %2F is never decoded (the value of `{x}` for 'a%2Fb' is 'a%2Fb'), nor are escapes that are not UTF-8."""
    stripped = path.strip("/")
    if not stripped:
        return []
    raw = stripped.split("/")
    return [aspnet_url_decode(text) for text in raw] if decode else raw


def _hex_byte(text: str, at: int) -> int | None:
    """The byte of `%XX` at `at`, or None (not a well-formed escape, or %2F, which ASP.NET never unescapes)."""
    pair = text[at + 1 : at + 3]
    if text[at : at + 1] != "%" or len(pair) != 2 or not all(c in string.hexdigits for c in pair):
        return None
    value = int(pair, 16)
    return None if value == 0x2F else value


def aspnet_url_decode(text: str) -> str:
    """ASP.NET Core's UrlDecoder.DecodeInPlace, as PathString.FromUriComponent (and Kestrel for Request.Path)
    applies it: `%XX` escapes that form UTF-8 are decoded; %2F stays escaped, and so do escapes that are not valid
    UTF-8 (copied as they are, where urllib's unquote puts U+FFFD)."""
    if "%" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        lead = _hex_byte(text, i) if text[i] == "%" else None
        if lead is None:
            out.append(text[i])
            i += 1
            continue
        end = i + 3
        if lead < 0x80:
            out.append(chr(lead))
            i = end
            continue
        count = 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 0
        data = bytes([lead])
        while len(data) < count:
            unit = _hex_byte(text, end)
            if unit is None or unit & 0xC0 != 0x80:
                break
            data += bytes([unit])
            end += 3
        try:
            if len(data) != count:
                raise ValueError(data)
            out.append(data.decode("utf-8"))  # (strict: overlong forms and surrogates fail, as in DecodeCore)
        except ValueError:
            out.append(text[i:end])  # the escapes read so far stay as they are
        i = end
    return "".join(out)


T = TypeVar("T")


@dataclass
class RouteTable(Generic[T]):
    """Routes in ASP.NET precedence order; the first template (and method) that matches wins."""

    entries: list[tuple[RouteTemplate, frozenset[str] | None, T]] = field(default_factory=list)

    def add(self, template: RouteTemplate, methods: Iterable[str] | None, target: T) -> None:
        allowed = frozenset(m.upper() for m in methods) if methods else None
        self.entries.append((template, allowed, target))
        self.entries.sort(key=lambda entry: entry[0].precedence_key())

    def resolve(self, method: str, path: str, *, decode: bool = True) -> tuple[T, dict[str, str]] | None:
        method = method.upper()
        texts = path_segments(path, decode=decode)
        for template, allowed, target in self.entries:
            if allowed is not None and method not in allowed:
                continue
            values = template.match_segments(texts)
            if values is not None:
                return target, values
        return None
