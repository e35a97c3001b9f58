"""Command-line options derived from config dataclasses: each setting is declared once.

A field of a config dataclass gives its option: the name (``max_steps`` -> ``--max-steps``),
the type and default (the field's annotation and default) and the help text (the field's
entry in the ``Attributes:`` section of the class docstring). ``Literal`` types become
choices, ``tuple[X, ...]`` takes several values, a bool that defaults to ``False`` is a
switch (``--bf16``), one that defaults to ``True`` is switched off (``--no-progress``), and
``bool | None`` gets both forms (``--tensorboard`` / ``--no-tensorboard``). A field without
a default is a required option.

What differs goes into the field's metadata under ``"cli"``::

    resume: bool | str = field(default=False, metadata={"cli": {
        "nargs": "?", "const": True, "metavar": "CHECKPOINT"}})

Keys: ``flag`` (the option's name, e.g. ``"--grad-accum"``; for a bool, the switch sets
the opposite of the default), ``positional``, ``help`` (instead of the docstring's),
``parse`` (turns the parsed value into the field's value; its ``ValueError`` reaches the
user as an error message), ``skip`` (not on the command line), and any keyword of
``argparse.ArgumentParser.add_argument`` (``nargs``, ``const``, ``metavar``, ``choices``,
``type``).

Every command also takes ``--config FILE.json``: the config's dict form
(``dataclasses.asdict``; a nested config, such as ``tisa convert``'s ``distill``, under its
field's name). The file's values replace the defaults and the options given on the command
line replace the file's; required options are still given on the command line. A file
that cannot be read or holds a key the config does not have is a ``ValueError`` (one
line, exit code 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

__all__ = ["add_config_arguments", "config_from_args", "field_help"]

_SPECIAL = ("flag", "positional", "help", "parse", "skip")


def field_help(cls: type) -> dict[str, str]:
    """Field name -> its description in the ``Attributes:`` section of ``cls``'s docstring.

    Continuation lines are joined; Sphinx roles and literals are reduced to their text
    (``:func:`~tisa.x.f``` -> ``f``, ````x```` -> ``x``).
    """
    doc = cls.__doc__ or ""
    match = re.search(r"^(\s*)Attributes:\s*$", doc, flags=re.MULTILINE)
    if match is None:
        return {}
    out: dict[str, str] = {}
    indent, name = None, None
    for line in doc[match.end() :].splitlines():
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent:
            break  # the section ended
        entry = re.match(r"(\w+):\s*(.*)$", line.strip())
        if depth == indent and entry:
            name = entry.group(1)
            out[name] = entry.group(2)
        elif name is not None:
            out[name] += " " + line.strip()
    return {k: _plain(v) for k, v in out.items()}


def _plain(text: str) -> str:
    text = re.sub(r"\s*\(:\w+:`[^`]+`\)", "", text)  # "(:data:`x.Y`)": a pointer for readers
    text = re.sub(r":\w+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = re.sub(r"``([^`]+)``", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def _spec(field: dataclasses.Field) -> dict[str, Any]:
    return dict(field.metadata.get("cli", {}))


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(the type without ``| None``, whether None is allowed)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        return (args[0] if len(args) == 1 else tp), optional
    return tp, False


def _default_text(value: Any) -> str:
    if isinstance(value, tuple | list):
        return " ".join(str(v) for v in value)
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def _has_default(field: dataclasses.Field) -> bool:
    return (
        field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    )


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()  # type: ignore[misc]


def _argument(
    field: dataclasses.Field, tp: Any, help_text: str
) -> tuple[list[str], dict[str, Any]]:
    """(names, keyword arguments) of ``add_argument`` for one field."""
    spec = _spec(field)
    kwargs = {k: v for k, v in spec.items() if k not in _SPECIAL}
    base, optional = _unwrap(tp)
    has_default = _has_default(field)
    default = _default(field) if has_default else None
    flag = spec.get("flag", "--" + field.name.replace("_", "-"))
    if spec.get("positional"):
        names = [field.name]
        if typing.get_origin(base) is tuple:
            kwargs.setdefault("nargs", "*" if has_default else "+")
            kwargs.setdefault("type", typing.get_args(base)[0])
        elif "type" not in kwargs and base in (int, float):
            kwargs["type"] = base
    elif base is bool and "nargs" not in kwargs:
        names = [flag]
        if optional:  # True, False or None (decide automatically)
            kwargs["action"] = argparse.BooleanOptionalAction
        elif "flag" in spec:
            kwargs["action"] = "store_false" if default else "store_true"
        else:
            if default:  # on unless switched off: the help says what the switch does
                names = ["--no-" + field.name.replace("_", "-")]
                if help_text and "help" not in spec:
                    help_text = "do not " + help_text[0].lower() + help_text[1:]
            kwargs["action"] = "store_false" if default else "store_true"
        kwargs["dest"] = field.name
    else:
        names = [flag]
        kwargs["dest"] = field.name
        if "flag" in spec:
            kwargs.setdefault("metavar", flag.lstrip("-").replace("-", "_").upper())
        if not has_default:
            kwargs["required"] = True
        if typing.get_origin(base) is Literal:
            kwargs.setdefault("choices", list(typing.get_args(base)))
        elif typing.get_origin(base) is tuple:
            kwargs.setdefault("nargs", "+")
            inner = typing.get_args(base)[0]
            if typing.get_origin(inner) is Literal:
                kwargs.setdefault("choices", list(typing.get_args(inner)))
            elif inner in (int, float):
                kwargs.setdefault("type", inner)
        elif base in (int, float) and "type" not in kwargs:
            kwargs["type"] = base
    if has_default:
        kwargs.setdefault("default", default)
    text = help_text
    shown = kwargs.get("default")
    if has_default and not (shown is None or isinstance(shown, bool) or shown == ()):
        if "default" not in text:  # the text may say it better
            text = text.rstrip(".") + f" (default: {_default_text(shown)})"
    kwargs["help"] = text.replace("%", "%%") if text else None
    return names, kwargs


def add_config_arguments(
    parser: argparse.ArgumentParser,
    config_class: type,
    *,
    exclusive: Iterable[Sequence[str]] = (),
) -> None:
    """Adds one option per field of the dataclass ``config_class`` to ``parser``, in the
    order of the fields.

    Args:
        parser: the subcommand's parser.
        config_class: a dataclass whose fields are the settings.
        exclusive: tuples of field names of which at most one may be given.
    """
    hints = typing.get_type_hints(config_class)
    helps = field_help(config_class)
    if not any(action.dest == "config" for action in parser._actions):
        parser.add_argument(
            "--config",
            metavar="FILE.json",
            help="settings from a JSON file (the config's dict form); options given here "
            "override it",
        )
    together: dict[str, Any] = {}
    for names in exclusive:
        group = parser.add_mutually_exclusive_group()
        together.update(dict.fromkeys(names, group))
    for field in dataclasses.fields(config_class):
        spec = _spec(field)
        if spec.get("skip") or not field.init:
            continue
        names, kwargs = _argument(
            field, hints[field.name], spec.get("help", helps.get(field.name, ""))
        )
        together.get(field.name, parser).add_argument(*names, **kwargs)


def config_from_args(
    config_class: type, args: argparse.Namespace, *, section: str | None = None, **values: Any
) -> Any:
    """The ``config_class`` instance described by parsed arguments (plus ``values``), over
    the ``--config`` file's settings when one is given.

    Args:
        config_class: the config dataclass.
        args: the parsed command line.
        section: the key of this config in the file, for a config nested in another
            (``"distill"`` in ``tisa convert``'s); None: the file's top level.
        **values: fields set by the caller (they win over the file and the options).

    Raises:
        ValueError: a value the config (or a field's ``parse``) refuses, or a ``--config``
            file that cannot be read or names a setting the config does not have.
    """
    hints = typing.get_type_hints(config_class)
    from_file = _file_settings(config_class, args, section, skip=set(values))
    given = _given_options(args) if from_file else set()
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(config_class):
        spec = _spec(field)
        if spec.get("skip") or not field.init or not hasattr(args, field.name):
            continue
        is_tuple = typing.get_origin(_unwrap(hints[field.name])[0]) is tuple
        if field.name in from_file and field.name not in given:
            value = from_file[field.name]  # the field's own value: no parse
            kwargs[field.name] = tuple(value) if is_tuple and isinstance(value, list) else value
            continue
        value = getattr(args, field.name)
        if "parse" in spec and value is not None:
            value = spec["parse"](value)
        elif isinstance(value, list) and is_tuple:
            value = tuple(value)
        kwargs[field.name] = value
    kwargs.update(values)
    return config_class(**kwargs)


def _file_settings(
    config_class: type, args: argparse.Namespace, section: str | None, skip: set[str]
) -> dict[str, Any]:
    """The settings of ``config_class`` in the ``--config`` file ({} without one)."""
    path = getattr(args, "config", None)
    if path is None:
        return {}
    try:
        data = json.loads(open(path, encoding="utf-8").read())
    except OSError as err:
        raise ValueError(f"--config {path}: cannot read it ({err.strerror or err})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"--config {path}: not a JSON file ({err})") from None
    where = "" if section is None else f" (key {section!r})"
    if section is not None:
        data = data.get(section, {}) if isinstance(data, dict) else data
    if not isinstance(data, dict):
        raise ValueError(f"--config {path}{where}: expected a JSON object of settings")
    names = {f.name for f in dataclasses.fields(config_class) if f.init}
    unknown = sorted(set(data) - names - skip)
    if unknown:
        raise ValueError(
            f"--config {path}{where}: unknown setting(s) {unknown} for "
            f"{config_class.__name__}; it takes {sorted(names)}"
        )
    return {k: v for k, v in data.items() if k not in skip}


def _given_options(args: argparse.Namespace) -> set[str]:
    """The settings given on the command line itself (not defaults): the command's
    arguments parsed again with every default suppressed."""
    parser, argv = getattr(args, "_parser", None), getattr(args, "_argv", None)
    if parser is None or argv is None:
        return set()
    rest = argv[argv.index(args.command) + 1 :] if args.command in argv else argv
    saved = [(action, action.default) for action in parser._actions]
    try:
        for action in parser._actions:
            action.default = argparse.SUPPRESS
        found, _ = parser.parse_known_args(rest)
    finally:
        for action, default in saved:
            action.default = default
    return set(vars(found))
