"""JSON Schemas from outside (a request's output format, an MCP server's tool schemas), checked and used without
ever fetching anything.

jsonschema's default registry resolves a `$ref` it does not hold by downloading it (`urlopen`, no timeout): a schema
could make the app fetch any URL, read local files (`file:`) or freeze the event loop on a server that never answers.
So every validator in the app comes from `safe_validator`: its registry holds only the standard meta-schemas and its
`retrieve` refuses, so only references inside the schema itself resolve. `check_schema` refuses up front (with the
reference at fault) what could not be validated that way, and schemas too large or too deep to be worth checking.

A check runs in bounded time: under a deadline set by the value's size (`schema_costs`: a small schema can make
jsonschema's work exponential), with its patterns matched within a budget of their own (`schema_patterns`: Python's
`re` can take exponential time on a hostile pattern); a check that runs out raises `SchemaRefusedError`.
"""

from __future__ import annotations

import functools
import json
import logging
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from .schema_costs import BRANCHING_KEYWORDS, CheckTooCostlyError, check_deadline, unique_items, within_deadline
from .schema_numbers import multiple_of
from .schema_patterns import BOUNDED_KEYWORDS, PatternError, check_pattern, match_budget

logger = logging.getLogger(__name__)

MAX_SCHEMA_CHARS = 64_000
"""A schema's size as compact JSON (tool and output schemas are a few KB; OpenAI caps them well below this)."""
MAX_SCHEMA_DEPTH = 32
"""How deep a schema's JSON may nest (about 15 levels of nested objects)."""
MAX_INSTANCE_CHARS = 2_000_000
"""The largest JSON text checked against a schema (a model's whole answer is far smaller)."""

_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose values are data, not schemas: a "$ref" inside them is a value, not a reference.
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "example"})
# Keywords whose values map names (properties, definitions) or patterns to schemas: their keys are not keywords.
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


class SchemaRefusedError(ValueError):
    """A schema this app will not use (a non-local reference, too large or deep, not a valid schema)."""


class InvalidSchemaError(SchemaRefusedError):
    """Not a valid JSON Schema (by its dialect's meta-schema)."""


def _retrieve_nothing(uri: str) -> Any:
    raise NoSuchResource(ref=uri)


# Only the meta-schemas (jsonschema adds them to every registry) and the schema's own resources resolve.
NO_RETRIEVAL = Registry(retrieve=_retrieve_nothing)  # type: ignore[call-arg]


def check_schema(schema: Any) -> None:
    """Raise `SchemaRefusedError` naming what is wrong, unless `schema` is a valid JSON Schema of a known dialect,
    within the size and depth limits, whose references all point inside it (`#...`)."""
    if not isinstance(schema, dict):
        raise SchemaRefusedError(f"a schema must be a JSON object, not {type(schema).__name__}")
    try:
        # allow_nan=False: NaN and the infinities are not JSON (a parser may still hand them over, e.g. an MCP
        # server's `1e999`), and jsonschema's arithmetic fails on them.
        size = len(json.dumps(schema, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError, RecursionError) as error:
        raise SchemaRefusedError(f"the schema is not plain JSON ({error})") from error
    if size > MAX_SCHEMA_CHARS:
        raise SchemaRefusedError(f"the schema is too large ({size} characters as JSON, at most {MAX_SCHEMA_CHARS})")
    _check_shape(schema)
    dialect = schema.get("$schema")
    if dialect is not None and (
        not isinstance(dialect, str) or validators.validator_for(schema, default=None) is None  # type: ignore[arg-type]
    ):
        raise SchemaRefusedError(f"unknown $schema dialect {str(dialect)[:200]!r}")
    try:
        validators.validator_for(schema).check_schema(schema)
    except schema_errors.SchemaError as error:
        raise InvalidSchemaError(f"not a valid JSON schema: {error.message}") from error


def safe_validator(schema: dict[str, Any]) -> Validator:
    """A validator for `schema` (checked by `check_schema`) that resolves only references inside the schema and
    matches its patterns in bounded time."""
    check_schema(schema)
    return _bounded(validators.validator_for(schema))(schema, registry=NO_RETRIEVAL)  # type: ignore[call-arg]


@functools.cache
def _bounded(cls: type[Validator]) -> type[Validator]:
    """The dialect's validator class with the keywords that branch or jump under the check's deadline, its pattern
    keywords matching in bounded time (`schema_patterns`), `uniqueItems` in one pass (`schema_costs`) and
    `multipleOf` exact beyond a float's range (`schema_numbers`)."""
    keywords = {k: v for k, v in BOUNDED_KEYWORDS.items() if k in cls.VALIDATORS}
    if "uniqueItems" in cls.VALIDATORS:
        keywords["uniqueItems"] = unique_items
    if "multipleOf" in cls.VALIDATORS:
        keywords["multipleOf"] = multiple_of
    for name in BRANCHING_KEYWORDS & cls.VALIDATORS.keys():
        keywords[name] = within_deadline(cls.VALIDATORS[name])
    return validators.extend(cls, keywords)


def schema_errors_of(
    validator: Validator, instance: Any, limit: int = 10, value_chars: int | None = None
) -> list[schema_errors.ValidationError]:
    """The first `limit` ways `instance` does not match (sorted by where), or `SchemaRefusedError` when the schema
    needs a document it does not hold (never fetched) or costs too much to check. `value_chars`: the length of the
    instance's JSON, if at hand (it sets the check's deadline)."""
    found = []
    with _checking(instance, value_chars):
        for error in validator.iter_errors(instance):
            found.append(error)
            if len(found) >= limit:
                break
    return sorted(found, key=lambda e: [str(p) for p in e.absolute_path])


def best_error(
    validator: Validator, instance: Any, value_chars: int | None = None
) -> schema_errors.ValidationError | None:
    """The most relevant way `instance` does not match (as `jsonschema.validate` reports it), or None."""
    with _checking(instance, value_chars):
        return schema_errors.best_match(validator.iter_errors(instance))


@contextmanager
def _checking(instance: Any, value_chars: int | None) -> Iterator[None]:
    """One check of one value: a deadline by its size, one time budget for its patterns; what makes the schema
    unusable is refused."""
    if value_chars is None:
        value_chars = len(json.dumps(instance, separators=(",", ":"), default=str))
    try:
        with check_deadline(value_chars), match_budget():
            yield
    except Unresolvable as error:
        raise SchemaRefusedError(f"the schema refers to {error.ref!r}, which is not inside it") from error
    except RecursionError as error:  # e.g. {"$ref": "#"}: references that loop without consuming the instance
        raise SchemaRefusedError(_LOOPING_REFERENCES) from error
    except (PatternError, CheckTooCostlyError) as error:
        raise SchemaRefusedError(str(error)) from error
    except BaseException as error:
        if not isinstance(error, Exception) and not _is_extension_panic(error):
            raise  # KeyboardInterrupt, SystemExit, a cancelled task: not the check's to answer
        if "RecursionError" in str(error):  # the recursion limit met inside a Rust lookup (see `_is_extension_panic`)
            raise SchemaRefusedError(_LOOPING_REFERENCES) from error
        # jsonschema failing on a schema its meta-schema accepts (its own bugs, such as those `schema_numbers` and
        # `_check_shape` keep out): the value cannot be checked, which every caller reports as such. The log names
        # the failure and where it was raised, never the schema or the value.
        failure = type(error).__name__
        where = traceback.extract_tb(error.__traceback__)[-1]
        logger.warning(
            "jsonschema failed checking a value: %s in %s (%s:%d)",
            failure, where.name, where.filename.rsplit("site-packages/", 1)[-1], where.lineno or 0,
        )
        raise SchemaRefusedError(f"the schema cannot be checked here (jsonschema fails on it: {failure})") from error


_LOOPING_REFERENCES = "the schema's references loop; it cannot be checked"


def _is_extension_panic(error: BaseException) -> bool:
    """A Rust extension's panic (pyo3's `PanicException`, a BaseException). The registry that resolves references
    (`referencing`, on `rpds`) compares URIs in Rust: when a looping reference reaches Python's recursion limit right
    at that comparison, the RecursionError becomes a panic there (found by fuzzing), not the RecursionError above."""
    return type(error).__name__ == "PanicException" and type(error).__module__ == "pyo3_runtime"


def _check_shape(schema: dict[str, Any]) -> None:
    """Depth limit, `$schema` only at the root, local references only, patterns that compile in bounded time, no
    `unevaluatedProperties` with `patternProperties` (jsonschema matches those patterns itself, with `re`: see
    `schema_patterns`) and, under draft 2019-09, no `unevaluatedItems` with a boolean `items`; walked without
    recursion (the schema may be hostile). Data (`enum`, `const`, ...) and the names of name maps (`properties`,
    `$defs`, ...) are not keywords: a property named `$ref` or `patternProperties` is just a name."""
    stack: list[tuple[Any, int, str, bool, bool]] = [(schema, 1, "#", False, False)]
    unevaluated = patterned = unevaluated_items = boolean_items = False
    # jsonschema's draft 2019-09 `unevaluatedItems` takes a boolean `items` for a list of schemas (TypeError).
    legacy_items = isinstance(schema.get("$schema"), str) and validators.validator_for(
        schema, default=None  # type: ignore[arg-type]
    ) is validators.Draft201909Validator
    while stack:
        node, depth, where, data, names = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaRefusedError(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels (at {where[:200]})")
        if isinstance(node, dict):
            is_schema = not (data or names)
            if is_schema:
                if depth > 1 and "$schema" in node:
                    # jsonschema switches to the named dialect's own validator class there, without the bounds
                    # (`_bounded`): its patterns would match with `re`, unbounded, its branches without a deadline.
                    raise SchemaRefusedError(f"$schema at {where[:200]}: a dialect is named only at the schema's root")
                _check_keywords(node, where)
                unevaluated = unevaluated or "unevaluatedProperties" in node
                patterned = patterned or bool(node.get("patternProperties"))
                if unevaluated and patterned:
                    raise SchemaRefusedError(
                        "the schema uses both unevaluatedProperties and patternProperties, which cannot be checked in"
                        " bounded time here; use additionalProperties instead of unevaluatedProperties"
                    )
                unevaluated_items = unevaluated_items or "unevaluatedItems" in node
                boolean_items = boolean_items or isinstance(node.get("items"), bool)
                if legacy_items and unevaluated_items and boolean_items:
                    raise SchemaRefusedError(
                        "under draft 2019-09 the schema's unevaluatedItems cannot be checked beside a boolean items"
                        ' (jsonschema fails on it); write "items": {} for true and "items": {"not": {}} for false'
                    )
            for key, value in node.items():
                if isinstance(value, dict | list):
                    # Only a schema's keyword holds data: in a name map, `enum` or `default` names a property.
                    stack.append((value, depth + 1, f"{where}/{key}", data or (is_schema and key in _DATA_KEYWORDS),
                                  is_schema and key in _NAME_MAPS))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, dict | list):
                    stack.append((value, depth + 1, f"{where}/{index}", data, False))


def _check_keywords(schema: dict[str, Any], where: str) -> None:
    """One (sub)schema's references point inside the schema, and its patterns compile in bounded time."""
    for keyword in _REF_KEYWORDS:
        ref = schema.get(keyword)
        if isinstance(ref, str) and not ref.startswith("#"):
            raise SchemaRefusedError(
                f"{keyword} {ref[:200]!r} at {where[:200]} points outside the schema; only references inside"
                " it ('#/...') are allowed (nothing is fetched)"
            )
    patterns = [schema["pattern"]] if isinstance(schema.get("pattern"), str) else []
    if isinstance(schema.get("patternProperties"), dict):
        patterns += [key for key in schema["patternProperties"] if isinstance(key, str)]
    for pattern in patterns:
        try:
            check_pattern(pattern)
        except PatternError as error:
            raise SchemaRefusedError(f"{error} (at {where[:200]})") from error


__all__ = [
    "MAX_INSTANCE_CHARS",
    "MAX_SCHEMA_CHARS",
    "MAX_SCHEMA_DEPTH",
    "NO_RETRIEVAL",
    "InvalidSchemaError",
    "SchemaRefusedError",
    "best_error",
    "check_schema",
    "safe_validator",
    "schema_errors_of",
]
