"""The declaration of one broker setting: what each owner writes beside its config dataclass (issue 25).

The coordinator (``GroupConfig``), storage (``LogDefaults`` and the topic settings), the transaction coordinator
(``TxnConfig``), the server and the control API each declare their settings themselves, one ``Setting`` each
(name, default, parser, help, Kafka's name and default, choices), as a field default written with
``Setting.field``; ``broker/config/settings.py`` only collects them into its ``OPTIONS`` and derives the flag, the
``GROUP_BROKER_*`` variable, the TOML keys, the README table and DescribeConfigs from each. Kafka's counterpart is
a ``ConfigDef.define`` call beside the owner's config class (``GroupCoordinatorConfig``, ``TransactionLogConfig``).

A leaf of the lowest layer (stdlib only), so that every owner, config/ above them and the server's and control's
declarations (``broker/server/settings.py``, ``broker/control/settings.py``, ranked low in tests/test_layout.py so
that config/ may import them) can all import it without an import pointing up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "GROUP_BROKER_"
# Java's Integer.MAX_VALUE: Kafka's default for the limits it leaves open (group.max.size, max.connections).
INT32_MAX = 2**31 - 1

# The key under which a dataclass field's metadata holds the Setting that fills it.
DECLARED = "setting"


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def parse_names(text: str) -> tuple[str, ...]:
    """Kafka's LIST type: comma-separated, each item trimmed, empty items dropped. Which names are valid is the
    owner's config class to say, so a bad one refuses start with its message."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def names_from_toml(value: Any) -> str | None:
    """A TOML list of strings as the flag would take it (Kafka's LIST type)."""
    if not isinstance(value, list):
        return None
    if not all(isinstance(item, str) for item in value):
        raise ValueError(f"expected a TOML list of strings, got {value!r}")
    return ",".join(value)


def did_you_mean(typed: str, known: Iterable[str]) -> str:
    """`` (did you mean 'json'?)`` for a near miss of one of ``known``, else empty (difflib, loaded on the error
    path only)."""
    import difflib

    close = difflib.get_close_matches(typed, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting. ``name`` is the TOML key; the flag is ``--name-with-dashes``, the variable GROUP_BROKER_NAME.

    ``fills`` is the dotted path of the field the value goes to in ``Settings`` (``"group.max_size"``); the owner
    leaves it out, and config/ fills it in from where the declaration sits when it collects the options."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    help: str
    kafka: str | None = None  # Kafka's name for the same setting, also accepted as a TOML key
    kafka_default: str | None = None  # as Kafka documents it; None: the same as ours
    choices: tuple[str, ...] = ()
    shown_default: str | None = None  # when the default is computed
    # A TOML list or table as the text the flag takes (None: not a shape this setting takes); without it a TOML
    # value must be the parser's native type.
    from_toml_shape: Callable[[Any], str | None] | None = None
    fills: str | None = None
    setting: bool = True  # False for ``config``: it names the file the settings come from, it is not one
    bounds: tuple[int, int] | None = None  # an integer setting's lowest and highest value (ports)

    def field(self) -> Any:
        """The dataclass field this setting fills: its default, and the declaration in its metadata."""
        return dataclasses.field(default=self.default, metadata={DECLARED: self})

    @property
    def path(self) -> str:
        return self.fills or self.name

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    def from_text(self, text: str) -> Any:
        """The value of ``text`` as the flag or variable gives it; ValueError saying what is allowed (issue 26:
        never Python's ``invalid literal for int()``; a near miss of a choice gets "did you mean")."""
        try:
            value = self.parse(text)
        except ValueError:
            if self.parse is int:
                raise ValueError(f"expected an integer{self._range()}, got {text!r}") from None
            raise
        if self.choices and value not in self.choices:
            hint = did_you_mean(text, self.choices)
            raise ValueError(f"expected one of {', '.join(self.choices)}, got {text!r}{hint}")
        return self._bounded(value, repr(text))

    def _range(self) -> str:
        return "" if self.bounds is None else f" from {self.bounds[0]} to {self.bounds[1]}"

    def _bounded(self, value: Any, shown: str) -> Any:
        if self.bounds is not None and isinstance(value, int) and not self.bounds[0] <= value <= self.bounds[1]:
            raise ValueError(f"expected an integer{self._range()}, got {shown}")
        return value

    def from_toml(self, value: Any) -> Any:
        """A TOML value: native types as they are (no silent conversions), strings as the flag would take them."""
        if self.from_toml_shape is not None and isinstance(value, list | dict):
            text = self.from_toml_shape(value)
            if text is not None:
                return self.from_text(text)
        expected: type = {int: int, parse_bool: bool}.get(self.parse, str)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ValueError(f"expected a TOML {expected.__name__}, got {type(value).__name__} {value!r}")
        return self.from_text(value) if isinstance(value, str) else self._bounded(value, repr(value))

    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.default is None or self.default == ():
            return "none"
        if isinstance(self.default, bool):
            return str(self.default).lower()
        if isinstance(self.default, tuple) and all(isinstance(item, str) for item in self.default):
            return ",".join(self.default)  # a LIST setting, written as Kafka writes it
        return str(self.default)
