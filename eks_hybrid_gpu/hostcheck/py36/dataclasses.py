"""`dataclasses` for Python 3.6, where the standard library has none: only in the host check's artifact.

RHEL 8's python3 is 3.6, and the host check (and the vocabulary it imports) declares its records with
`@dataclass(frozen=True)`. The artifact puts this folder on `sys.path` on 3.6 alone (eks_hybrid_gpu/hostartifact.py
writes its `__main__`), so 3.7 and newer use the standard library's module. It covers what those records use:
`dataclass(frozen=..., eq=...)`, `field(default=..., default_factory=..., compare=...)`, generated `__init__`,
`__repr__`, `__eq__`, `__hash__` and frozen assignment; methods a class defines itself are kept.
"""

from typing import Any, Callable, Dict, List, Tuple

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen dataclass."""


class Field:
    """One field: its name, default or default factory, and whether it takes part in == and hash."""

    def __init__(self, default: Any = _MISSING, default_factory: Any = _MISSING, compare: bool = True) -> None:
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.compare = compare


def field(*, default: Any = _MISSING, default_factory: Any = _MISSING, compare: bool = True, **_: Any) -> Any:
    """A field with a default, a default factory, or left out of comparison."""
    return Field(default, default_factory, compare)


def fields(instance: Any) -> Tuple[Field, ...]:
    """The fields of a dataclass or its instance, in order."""
    return tuple(instance.__dataclass_fields__.values())


def _fields_of(cls: type) -> List[Field]:
    found: Dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        found.update(getattr(base, "__dataclass_fields__", {}))
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if "ClassVar" in str(annotation):
            continue
        declared = cls.__dict__.get(name, _MISSING)
        made = declared if isinstance(declared, Field) else Field(default=declared)
        made.name = name
        if isinstance(declared, Field):
            if made.default is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, made.default)
        found.pop(name, None)
        found[name] = made
    return list(found.values())


def _process(cls: type, frozen: bool, eq: bool) -> type:
    declared = _fields_of(cls)
    cls.__dataclass_fields__ = {f.name: f for f in declared}  # type: ignore[attr-defined]
    names = [f.name for f in declared]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(declared):
            raise TypeError(f"{cls.__name__}() takes {len(declared)} arguments, {len(args)} given")
        values = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {key!r}")
            values[key] = value
        for one in declared:
            if one.name not in values:
                if one.default is not _MISSING:
                    values[one.name] = one.default
                elif one.default_factory is not _MISSING:
                    values[one.name] = one.default_factory()
                else:
                    raise TypeError(f"{cls.__name__}() is missing the argument {one.name!r}")
            object.__setattr__(self, one.name, values[one.name])
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()

    def __repr__(self: Any) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{cls.__qualname__}({shown})"

    def _key(self: Any) -> Tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in declared if f.compare)

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return _key(self) == _key(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(_key(self))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self: Any, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    generated: Dict[str, Callable[..., Any]] = {"__init__": __init__, "__repr__": __repr__}
    if eq:
        generated["__eq__"] = __eq__
    if frozen:
        generated.update(__setattr__=__setattr__, __delattr__=__delattr__)
        if eq:
            generated["__hash__"] = __hash__
    for name, method in generated.items():
        if name not in cls.__dict__ or name == "__hash__":
            setattr(cls, name, method)
    if eq and not frozen and "__hash__" not in cls.__dict__:
        cls.__hash__ = None  # type: ignore[assignment]
    return cls


def dataclass(cls: Any = None, *, frozen: bool = False, eq: bool = True, **_: Any) -> Any:
    """`@dataclass` or `@dataclass(frozen=True)`."""

    def wrap(target: type) -> type:
        return _process(target, frozen, eq)

    return wrap if cls is None else wrap(cls)
