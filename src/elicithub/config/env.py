"""Environment variables in config strings: `${NAME}`, `${NAME:-default}` and `$$`, each unset one an error naming
its key path."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
"""`${NAME}`, `${NAME:-default}` (the default also when NAME is empty, as in a shell), and `$$` for a literal `$`."""


def interpolate(data: Any, environ: Mapping[str, str], path: str = "") -> tuple[Any, list[str]]:
    """The config with `${...}` in its strings replaced from `environ`; and one error per unset variable that has
    no default, naming the key path and the variable."""
    if isinstance(data, str):
        missing: list[str] = []

        def value(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name is None:
                return "$"
            found = environ.get(name)
            if found:
                return found
            if default is not None:
                return default
            if found is None:
                missing.append(
                    f"{path or 'config'}: environment variable {name} is not set (write ${{{name}:-...}} for a default)"
                )
                return ""
            return found

        return _VARIABLE.sub(value, data), missing
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        errors: list[str] = []
        for key, item in data.items():
            out[key], found = interpolate(item, environ, f"{path}.{key}" if path else str(key))
            errors += found
        return out, errors
    if isinstance(data, list):
        items, errors = [], []
        for index, item in enumerate(data):
            done, found = interpolate(item, environ, f"{path}[{index}]")
            items.append(done)
            errors += found
        return items, errors
    return data, []
