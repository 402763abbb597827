"""An option declared once: a dataclass field that carries its command-line flags and help beside its default. The
parser is made from the fields and a result's metadata is read from them, so an option has one name (the field's,
which is its long flag's without the dashes) on the command line, in the code and in the file it writes."""
from __future__ import annotations

import argparse
from dataclasses import MISSING, field, fields


def option(default=MISSING, *flags: str, help: str, factory=None, recorded: bool = True, **argparse_kw):
    """A field with `default` (or `factory`) that the command line sets through `flags` (the field's name must be
    the long flag's); argparse_kw as add_argument's (type, nargs, const, action). Its value as given on the command
    line (a string where no type is named) is the dataclass's to check and normalise. `recorded`: written into a
    result's metadata under the field's name."""
    meta = {"flags": flags, "help": help, "argparse": argparse_kw, "recorded": recorded}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _declared(cls) -> list:
    return [f for f in fields(cls) if "flags" in f.metadata]


def add_arguments(parser: argparse.ArgumentParser, cls) -> None:
    """One argument per option field of `cls`, its default the field's."""
    for f in _declared(cls):
        long = next(x for x in f.metadata["flags"] if x.startswith("--"))
        assert long[2:].replace("-", "_") == f.name, f"{cls.__name__}.{f.name}: its long flag is {long}"
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        parser.add_argument(*f.metadata["flags"], dest=f.name, default=default, help=f.metadata["help"],
                            **f.metadata["argparse"])


def given(ns: argparse.Namespace, cls) -> dict:
    """The parsed values of `cls`'s option fields, by field name: cls(**given(ns, cls), ...)."""
    return {f.name: getattr(ns, f.name) for f in _declared(cls)}


def recorded(obj) -> dict:
    """The recorded options' values (after the dataclass's normalisation), by field name."""
    return {f.name: getattr(obj, f.name) for f in _declared(type(obj)) if f.metadata["recorded"]}
