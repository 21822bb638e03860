""""Did you mean" for a near miss on the command line (issue 26, item 8): a flag, a command or a choice.

Loaded only on the error path (difflib, re): a command line that parses never imports it.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable, Sequence

# argparse's own wording (Python 3.11-3.13): "invalid choice: 'grups' (choose from 'serve', 'groups', ...)".
_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<typed>[^']*)' \(choose from (?P<choices>.*)\)$")


def closest(typed: str, known: Iterable[str]) -> str | None:
    found = difflib.get_close_matches(typed, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def with_hint(message: str) -> str:
    """argparse's error ``message`` with "did you mean" added to an invalid choice that is a near miss."""
    match = _INVALID_CHOICE.search(message)
    if match is None:
        return message
    choices = re.findall(r"'([^']*)'", match["choices"])
    near = closest(match["typed"], choices)
    return f"{message} (did you mean {near!r}?)" if near else message


def unrecognized(parser: argparse.ArgumentParser, arguments: Sequence[str], unknown: Sequence[str]) -> str:
    """``unrecognized arguments: --prot 9092 (did you mean --port?)``: each unknown flag against the flags of
    the command being run (its sub-command's parser, found by walking ``arguments``)."""
    flags = option_strings(parser, arguments)
    hints = []
    for word in unknown:
        if word.startswith("--"):
            flag = word.split("=", 1)[0]
            near = closest(flag, flags)
            if near is not None:
                hints.append(f"{flag}: did you mean {near}?" if len(unknown) > 2 else f"did you mean {near}?")
    hint = f" ({'; '.join(hints)})" if hints else ""
    return f"unrecognized arguments: {' '.join(unknown)}{hint}"


def option_strings(parser: argparse.ArgumentParser, arguments: Sequence[str]) -> list[str]:
    """The long flags of the parser that ``arguments`` reach, and of the parsers above it."""
    flags: list[str] = []
    current: argparse.ArgumentParser | None = parser
    words = list(arguments)
    while current is not None:
        step: argparse.ArgumentParser | None = None
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                for index, word in enumerate(words):
                    if word in action.choices:
                        step = action.choices[word]
                        words = words[index + 1 :]
                        break
            else:
                flags += [option for option in action.option_strings if option.startswith("--")]
        current = step
    return flags
