"""What `agent_runs.wire.compact_json` needs to know about a payload's type, worked out once per type.

- The tags: one-value `Literal` fields (`kind`), always written; and which fields can hold a model with a tag (the
  only ones the tag restorer walks into).
- Whether leaving default-valued fields out can change what the reader gets (`reads_back_unchanged`). A field left out
  validates to its default, which equals the value left out; what could still differ: a union of several models told
  apart by their fields rather than by a tag (a model missing fields may read as another member), validators and
  serializers (they may depend on what is present, or shape the dump), aliases, `validate_default`, computed fields,
  `Any` (an untyped value reads back as plain JSON). A type with none of these, all the way down, reads back
  unchanged; for any other type `compact_json` validates its output and compares. Unknown constructs count as unsafe.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import types
import uuid
from collections.abc import Mapping, Sequence
from functools import cache
from inspect import isclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, RootModel
from pydantic.fields import FieldInfo

_LEAVES = (str, int, float, bool, bytes, type(None), datetime.datetime, datetime.date, datetime.time,
           datetime.timedelta, decimal.Decimal, uuid.UUID, enum.Enum)
_SEQUENCES = (list, tuple, set, frozenset, Sequence)
_MAPPINGS = (dict, Mapping)


def is_tag(annotation: Any) -> bool:
    return get_origin(annotation) is Literal and len(get_args(annotation)) == 1


def _is_model(annotation: Any) -> bool:
    return isclass(annotation) and issubclass(annotation, BaseModel)


@cache
def holds_tags(annotation: Any) -> bool:
    """Whether a value of this type can hold a model with a tag field (`Any` can hold anything)."""
    return _holds_tags(annotation, frozenset())


def _holds_tags(annotation: Any, seen: frozenset[Any]) -> bool:
    if annotation is Any:
        return True
    if get_origin(annotation) is Annotated:
        return _holds_tags(get_args(annotation)[0], seen)
    if _is_model(annotation):
        if annotation in seen:
            return False  # a model holding itself: its other fields decide
        seen = seen | {annotation}
        return any(is_tag(f.annotation) or _holds_tags(f.annotation, seen) for f in annotation.model_fields.values())
    if get_origin(annotation) is Literal:
        return False
    return any(_holds_tags(arg, seen) for arg in get_args(annotation) if arg is not Ellipsis)


@cache
def tags_and_nested(model_type: type[BaseModel]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The tag fields of `model_type`, and the other fields that can hold tags (where tags can hide)."""
    fields = model_type.model_fields
    return (tuple(name for name, f in fields.items() if is_tag(f.annotation)),
            tuple(name for name, f in fields.items() if not is_tag(f.annotation) and holds_tags(f.annotation)))


@cache
def reads_back_unchanged(annotation: Any) -> bool:
    """Whether every value of this type, dumped without the fields that hold their default (tags kept), validates
    to what its full dump validates to: decided from the declaration alone (see the module doc)."""
    return _safe(annotation, None, frozenset())


def _safe(annotation: Any, discriminator: str | None, seen: frozenset[Any]) -> bool:
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *metadata = get_args(annotation)
        for item in metadata:
            if isinstance(item, FieldInfo):
                if not _plain_field_info(item):
                    return False
                discriminator = item.discriminator if isinstance(item.discriminator, str) else discriminator
            elif not _plain_metadata(item):
                return False
        return _safe(inner, discriminator, seen)
    if origin is Union or isinstance(annotation, types.UnionType):
        members = get_args(annotation)
        if not all(_safe(member, None, seen) for member in members):
            return False
        if discriminator is not None:
            return all(_tagged_by(member, discriminator) for member in members if member is not type(None))
        return _told_apart([member for member in members if _takes_objects(member)])
    if origin is Literal:
        return True
    if origin is not None:
        if isclass(origin) and issubclass(origin, _MAPPINGS):
            args = get_args(annotation)
            return not args or all(_safe(arg, None, seen) for arg in args)
        if isclass(origin) and issubclass(origin, _SEQUENCES):
            return all(_safe(arg, None, seen) for arg in get_args(annotation) if arg is not Ellipsis)
        return False
    if _is_model(annotation):
        return _safe_model(annotation, seen)
    return isclass(annotation) and issubclass(annotation, _LEAVES)


def _safe_model(model_type: type[BaseModel], seen: frozenset[Any]) -> bool:
    if model_type in seen:
        return True  # a model holding itself: its other fields decide
    if issubclass(model_type, RootModel) or model_type.model_post_init is not BaseModel.model_post_init:
        return False
    decorators = model_type.__pydantic_decorators__
    if any((decorators.validators, decorators.field_validators, decorators.root_validators,
            decorators.field_serializers, decorators.model_serializers, decorators.model_validators,
            decorators.computed_fields)):
        return False
    config = model_type.model_config
    if config.get("validate_default") or config.get("alias_generator") is not None:
        return False
    seen = seen | {model_type}
    for field in model_type.model_fields.values():
        if not _plain_field_info(field):
            return False
        discriminator = field.discriminator if isinstance(field.discriminator, str) else None
        if field.discriminator is not None and discriminator is None:
            return False  # a callable discriminator may look at any field
        if not _safe(field.annotation, discriminator, seen):
            return False
    return True


def _plain_field_info(field: FieldInfo) -> bool:
    if field.alias or field.validation_alias or field.serialization_alias or field.validate_default:
        return False
    if field.exclude is True:
        return False
    return all(_plain_metadata(item) for item in field.metadata)


def _plain_metadata(item: Any) -> bool:
    """Constraints (lengths, bounds, patterns) only check a value; validators and serializers may change it."""
    module = type(item).__module__
    return not (module.startswith("pydantic.functional_") or type(item).__name__ == "Discriminator"
                or callable(item))


def _takes_objects(annotation: Any) -> bool:
    """Whether a JSON object could validate as this member of a union."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _takes_objects(get_args(annotation)[0])
    if origin is Union or isinstance(annotation, types.UnionType):
        return any(_takes_objects(member) for member in get_args(annotation))
    if origin is not None:
        return isclass(origin) and issubclass(origin, _MAPPINGS)
    return not (isclass(annotation) and issubclass(annotation, _LEAVES) and not issubclass(annotation, dict))


def _told_apart(members: list[Any]) -> bool:
    """Whether a JSON object can validate as one of these union members only: at most one takes objects, or each is a
    model whose tags (always written) differ from every other's in some tag field they share."""
    if len(members) <= 1:
        return True
    tags = []
    for member in members:
        if get_origin(member) is Annotated:
            member = get_args(member)[0]
        if not _is_model(member):
            return False
        fields = member.model_fields.items()
        tags.append({name: get_args(field.annotation)[0] for name, field in fields if is_tag(field.annotation)})
    return all(any(name in other and other[name] != value for name, value in mine.items())
               for i, mine in enumerate(tags) for other in tags[i + 1:])


def _tagged_by(member: Any, discriminator: str) -> bool:
    """A discriminated union's member written with its tag: `discriminator` is one of its tag fields."""
    if get_origin(member) is Annotated:
        member = get_args(member)[0]
    if not _is_model(member):
        return False
    field = member.model_fields.get(discriminator)
    return field is not None and is_tag(field.annotation)
