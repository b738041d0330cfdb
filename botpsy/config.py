"""Config dataclasses -> command-line flags, and resolved configs saved beside stage outputs.

Every stage declares one dataclass. Each field carries its help text in
``metadata["help"]``; the flags of ``botpsy <stage>`` are generated from it, so the
dataclass is the single place a stage's options are written down.

Field metadata understood here:

* ``help`` (required): one sentence shown by ``--help``.
* ``positional``: the field is a positional argument instead of a ``--flag``.
* ``choices``: the allowed values.

Types map to flags as follows: ``bool`` -> ``--name/--no-name``; ``list[str]`` ->
a repeatable flag (``--model a --model b``) or, when positional, ``nargs="*"``;
``str | None`` and friends -> an optional value of the inner type.

Example::

    @dataclass
    class EchoConfig:
        text: str = field(default="hi", metadata={"help": "What to print."})

    cfg = parse_config(EchoConfig, ["--text", "hello"])
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A config file or flag value that cannot be used; the message says which and why."""


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """Return (inner type, is_optional) for ``X | None``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add one argument per field of ``cls`` to ``parser``."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        help_text = f.metadata.get("help")
        if not help_text:
            raise TypeError(f"{cls.__name__}.{f.name} has no help text in its metadata")
        tp, _ = _unwrap_optional(hints[f.name])
        default = _field_default(f)
        kwargs: dict[str, Any] = {"help": help_text}
        if "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        is_list = typing.get_origin(tp) is list
        elem = typing.get_args(tp)[0] if is_list else tp
        if f.metadata.get("positional"):
            if is_list:
                kwargs.update(nargs="*", type=elem, default=default)
            else:
                if default is not dataclasses.MISSING:
                    kwargs.update(nargs="?", default=default)
                kwargs["type"] = tp
            parser.add_argument(f.name, **kwargs)
            continue
        if tp is bool:
            kwargs.update(action=argparse.BooleanOptionalAction, default=default)
        elif is_list:
            kwargs.update(action="append", type=elem, default=None)
            kwargs["help"] += " (repeatable)"
        else:
            kwargs.update(type=tp, default=default)
        if default is not dataclasses.MISSING and tp is not bool and not is_list:
            kwargs["help"] += f" (default: {default})"
        if default is dataclasses.MISSING:
            kwargs["required"] = True
        parser.add_argument(_flag_name(f.name), dest=f.name, **kwargs)


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def config_from_namespace(cls: type[T], ns: argparse.Namespace) -> T:
    """Build ``cls`` from parsed arguments; list flags never given keep their defaults."""
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        value = getattr(ns, f.name)
        if value is None and _field_default(f) not in (None, dataclasses.MISSING):
            value = _field_default(f)
        values[f.name] = value
    return cls(**values)


def parse_config(cls: type[T], argv: list[str] | None = None, prog: str | None = None) -> T:
    """Parse ``argv`` into a ``cls`` instance (used by tests and scripts)."""
    parser = argparse.ArgumentParser(prog=prog, description=cls.__doc__)
    add_dataclass_arguments(parser, cls)
    return config_from_namespace(cls, parser.parse_args(argv))


def config_to_dict(cfg: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def save_config(cfg: Any, path: str | Path) -> Path:
    """Write the resolved config as JSON next to a stage's output."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config_to_dict(cfg), indent=2, sort_keys=True) + "\n")
    return path


def load_config(cls: type[T], path: str | Path) -> T:
    """Read a config saved by ``save_config``; unknown or mistyped keys raise ConfigError."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a JSON object, found {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"config file {path} has unknown keys for {cls.__name__}: {unknown}")
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        _check_type(path, key, value, hints[key])
    return cls(**data)


def _check_type(path: Path, key: str, value: Any, tp: Any) -> None:
    inner, optional = _unwrap_optional(tp)
    if value is None:
        if optional:
            return
        raise ConfigError(f"config file {path}: {key} may not be null")
    base = typing.get_origin(inner) or inner
    ok = isinstance(value, base) if isinstance(base, type) else True
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if base is int and isinstance(value, bool):
        ok = False
    if not ok:
        raise ConfigError(
            f"config file {path}: {key} should be {getattr(inner, '__name__', inner)}, "
            f"found {type(value).__name__} {value!r}"
        )


def override_report(inherited: Any, current: Any) -> list[str]:
    """Lines naming the fields where ``current`` differs from an inherited config."""
    a, b = dataclasses.asdict(inherited), dataclasses.asdict(current)
    return [f"{k}: {a[k]!r} -> {b[k]!r}" for k in sorted(a) if k in b and a[k] != b[k]]
