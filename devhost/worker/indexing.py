"""The checks the Azure Python worker applies when it indexes a v2-model app, for hosts that run the app in-process.

Where no worker package exists for this Python (3.11/3.12: Azure's worker is not published as a library), devhost
applies the same rules before serving, so an app the worker would refuse fails here too, with the worker's own text
(`FunctionLoadError: cannot load the X function: ...`). Re-derived from the worker's `Registry.add_indexed_function`
(azure_functions_worker/functions.py): binding directions, return bindings, the `context` parameter, parameters vs
bindings, `func.Out` annotations, and every annotation checked by the binding's converter from `azure.functions`
(HTTP v2 apps: by the web extension's request/response trackers). Where `azure-functions-runtime` runs (3.13+),
the real worker performs these checks and this module is not used.
"""

from __future__ import annotations

import collections.abc
import inspect
import sys
import types
import typing
from typing import Any

import azure.functions as func

# `BindingInfo.Direction` of the worker protocol: what `Binding.direction` compares against.
_IN, _OUT, _INOUT = 0, 1, 2
_UNDEFINED_DATA_TYPE = 0  # BindingInfo.DataType.undefined


class FunctionLoadError(RuntimeError):
    """Same name and text as the worker's, so `"{Type}: {message}"` reads exactly as on Azure."""

    def __init__(self, function_name: str, message: str) -> None:
        super().__init__(f"cannot load the {function_name} function: {message}")


class _Converters:
    """The worker's converter lookup: azure.functions' binding registry, deferred bindings, the generic fallback."""

    def __init__(self, http_v2: bool) -> None:
        self.registry = func.get_binding_registry()
        self.deferred = None
        self.http_v2 = None
        if "azurefunctions.extensions.base" in sys.modules:
            import azurefunctions.extensions.base as ext_base

            self.deferred = ext_base.get_binding_registry()
            # The worker asks the extension whether a web extension registered itself (a process-wide fact there);
            # devhost may have loaded other apps in this process, so the host's per-app answer decides.
            if http_v2:
                self.http_v2 = ext_base

    def is_deferred(self, annotation: Any) -> bool:
        return self.deferred is not None and bool(self.deferred.check_supported_type(annotation))

    def _binding(self, binding_type: str, deferred: bool = False) -> Any:
        found = None if deferred else self.registry.get(binding_type)
        if found is None and deferred and self.deferred is not None:
            found = self.deferred.get(binding_type)
        return found

    def has_implicit_output(self, binding_type: str) -> bool:
        binding = self._binding(binding_type)
        if binding is None:  # the worker's generic binding: every type but the durable client writes back
            return binding_type != "durableClient"
        return bool(getattr(binding, "has_implicit_output", lambda: False)())

    def check_input(self, binding_type: str, pytype: Any, deferred: bool) -> bool:
        if binding_type == "httpTrigger" and self.http_v2 is not None:
            return bool(self.http_v2.RequestTrackerMeta.check_type(pytype))
        binding = self._binding(binding_type, deferred)
        if binding is None:
            return _is_subclass(pytype, (str, bytes))
        return bool(binding.check_input_type_annotation(pytype))

    def check_output(self, binding_type: str, pytype: Any) -> bool:
        if binding_type == "http" and self.http_v2 is not None:
            return bool(self.http_v2.ResponseTrackerMeta.check_type(pytype))
        binding = self._binding(binding_type)
        if binding is None:
            return _is_subclass(pytype, (str, bytes, bytearray))
        return bool(binding.check_output_type_annotation(pytype))


def _is_subclass(pytype: Any, bases: tuple[type, ...]) -> bool:
    return isinstance(pytype, type) and issubclass(pytype, bases)


_GENERIC_ALIASES = (typing._GenericAlias, typing._SpecialGenericAlias, types.GenericAlias)  # type: ignore[attr-defined]


def _is_generic(annotation: Any) -> bool:
    """`typing_inspect.is_generic_type`, as the worker uses it: `List[int]` is generic, `Optional[int]` is not."""
    if isinstance(annotation, type) and issubclass(annotation, typing.Generic):  # type: ignore[arg-type]
        return True
    return isinstance(annotation, _GENERIC_ALIASES) and annotation.__origin__ not in (
        typing.Union, tuple, typing.ClassVar, collections.abc.Callable)


def _is_out(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) if _is_generic(annotation) else None
    candidate = origin if origin is not None else annotation
    return isinstance(candidate, type) and candidate.__name__ == "Out"


def _direction(binding: Any) -> int:
    return int(getattr(binding.direction, "value", binding.direction))


def check_app(functions: list[Any], *, http_v2: bool = False) -> None:
    """Raise `FunctionLoadError` for the first function the worker would refuse to index. `http_v2`: the app uses a
    web extension (azurefunctions-extensions-http-fastapi), so HTTP annotations are the extension's types."""
    converters = _Converters(http_v2)
    for function in functions:
        check_function(function, converters)


def check_function(function: Any, converters: _Converters | None = None) -> None:
    converters = converters or _Converters(http_v2=False)
    name = function.get_function_name()
    user_function = function.get_user_function()
    params = dict(inspect.signature(user_function).parameters)
    annotations = typing.get_type_hints(user_function)

    bound: dict[str, Any] = {}
    explicit_return = implicit_return = False
    return_binding: str | None = None
    for binding in function.get_bindings():
        direction = _direction(binding)
        if direction == _INOUT:
            raise FunctionLoadError(name, '"inout" bindings are not supported')
        if binding.name == "$return":
            if direction != _OUT:
                raise FunctionLoadError(name, '"$return" binding must have direction set to "out"')
            if not explicit_return:
                return_binding = binding.type
            explicit_return = True
            continue
        bound[binding.name] = binding
        if converters.has_implicit_output(binding.type):
            implicit_return = True
            if not explicit_return:
                return_binding = binding.type

    _check_context(name, params, bound, annotations)
    _check_params(name, params, bound, annotations, converters)
    _check_return(name, annotations, explicit_return, return_binding, converters)
    del implicit_return  # the worker records it; it adds no check


def _check_context(name: str, params: dict[str, Any], bound: dict[str, Any], annotations: dict[str, Any]) -> None:
    if "context" not in params or "context" in bound:
        return
    params.pop("context")
    annotation = annotations.get("context")
    if "context" in annotations and (not isinstance(annotation, type) or annotation.__name__ != "Context"):
        raise FunctionLoadError(
            name, f'the "context" parameter is expected to be of type azure.functions.Context, got {annotation!r}'
        )


def _check_params(name: str, params: dict[str, Any], bound: dict[str, Any], annotations: dict[str, Any],
                  converters: _Converters) -> None:
    if set(params) - set(bound):
        raise FunctionLoadError(
            name, f"the following parameters are declared in Python but not in function.json: "
                  f"{set(params) - set(bound)!r}")
    if set(bound) - set(params):
        raise FunctionLoadError(
            name, f"the following parameters are declared in function.json but not in Python: "
                  f"{set(bound) - set(params)!r}")
    for param in params.values():
        binding = bound[param.name]
        if param.name not in annotations:
            continue
        annotation = annotations[param.name]
        deferred = converters.is_deferred(annotation)
        param_is_out = _is_out(annotation)
        binding_is_out = _direction(binding) == _OUT
        pytype = annotation
        if param_is_out:
            args = typing.get_args(annotation)
            if len(args) != 1:
                raise FunctionLoadError(name, f"binding {param.name} has invalid Out annotation {annotation!r}")
            pytype = args[0]
        if not isinstance(pytype, type) and not _is_generic(pytype):
            raise FunctionLoadError(name, f"binding {param.name} has invalid non-type annotation {annotation!r}")
        if binding_is_out and not param_is_out:
            raise FunctionLoadError(
                name, f'binding {param.name} is declared to have the "out" direction, but its annotation in Python '
                      "is not a subclass of azure.functions.Out")
        if not binding_is_out and param_is_out:
            raise FunctionLoadError(
                name, f'binding {param.name} is declared to have the "in" direction in function.json, but its '
                      "annotation is azure.functions.Out in Python")
        bind_type = binding.type
        if pytype in (str, bytes) and not converters.has_implicit_output(binding.type):
            bind_type = "generic"
        fits = (converters.check_output(bind_type, pytype) if param_is_out
                else converters.check_input(bind_type, pytype, deferred))
        if fits:
            continue
        type_name = getattr(pytype, "__name__", repr(pytype))
        if binding.data_type is not _UNDEFINED_DATA_TYPE:  # an identity test in the worker: always true in v2 apps
            raise FunctionLoadError(
                name, f'{param.name!r} binding type "{binding.type}" and dataType "{binding.data_type}" in '
                      "function.json do not match the corresponding function parameter's Python type annotation "
                      f'"{type_name}"')
        raise FunctionLoadError(  # unreachable with v2 bindings
            name, f'type of {param.name} binding in function.json "{binding.type}" does not match its Python '
                  f'annotation "{type_name}"')


def _check_return(name: str, annotations: dict[str, Any], explicit_return: bool, return_binding: str | None,
                  converters: _Converters) -> None:
    if not explicit_return or "return" not in annotations:
        return
    annotation = annotations["return"]
    if _is_generic(annotation) and typing.get_origin(annotation) is not None and _is_out(annotation):
        raise FunctionLoadError(name, "return annotation should not be azure.functions.Out")
    if not isinstance(annotation, type):
        raise FunctionLoadError(name, f"has invalid non-type return annotation {annotation!r}")
    if not converters.check_output(return_binding or "", annotation):
        raise FunctionLoadError(
            name, f'Python return annotation "{annotation.__name__}" does not match binding type "{return_binding}"')
