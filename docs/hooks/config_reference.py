"""An mkdocs hook that writes the configuration reference from the config's pydantic models at build time, so the
page cannot drift from the code: every key, its type and limits, its default, and its docstring."""

from __future__ import annotations

import json
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from elicithub.config import Config

PAGE = "config-reference.md"
INTRO = """# Configuration reference

Every key of the config file, generated from the hub's own models (`src/elicithub/config/`, a module per
section) each time the site is built. `elicithub config check FILE` validates a file
against the same models; an unknown key or a bad value is an error naming its key path. See
[Configuration](configuration.md) for how the pieces fit together.
"""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated page (replacing a file of that name, should one exist under docs/)."""
    existing = files.get_file_from_path(PAGE)
    if existing is not None:
        files.remove(existing)
    files.append(File.generated(config, PAGE, content=reference()))
    return files


def reference() -> str:
    """The page's Markdown: a section per model, reached from the top level in the order of its fields; a model
    found at two key paths (`oauth`) has its section at the first."""
    paths: dict[type[BaseModel], str] = {}

    def visit(model: type[BaseModel], path: str) -> None:
        if model in paths:
            return
        paths[model] = path
        for name, field in model.model_fields.items():
            nested = _model_of(field.annotation)
            if nested is not None:
                visit(nested, _child(path, field.alias or name, field.annotation))

    visit(Config, "")
    sections = [_section(model, path, paths) for model, path in paths.items()]
    defaults = yaml.safe_dump(Config().model_dump(mode="json"), sort_keys=False, width=120)
    everything = f"## Every default\n\nA config that says nothing is this one:\n\n```yaml\n{defaults}```\n"
    return "\n".join([INTRO, *sections, everything])


def _section(model: type[BaseModel], path: str, paths: dict[type[BaseModel], str]) -> str:
    title = f"`{path}`" if path else "Top level"
    lines = [f"## {title} {{#{_anchor(path)}}}", ""]
    if model.__doc__ and model is not BaseModel:
        lines += [_one_line(model.__doc__), ""]
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        row = [f"`{field.alias or name}`", _type(field.annotation, paths), _default(field), _description(field)]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


def _child(path: str, name: str, annotation: Any) -> str:
    """The key path of a nested model: `store`, `auth.oidc`, `mcp_servers[].oauth`."""
    key = f"{path}.{name}" if path else name
    return key + "[]" if _is_list(annotation) else key


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "top-level"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, alone, optional, or in a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) is list or any(_is_list(a) for a in get_args(annotation) if a is not type(None))


def _type(annotation: Any, paths: dict[type[BaseModel], str]) -> str:
    """A type as a reader of YAML thinks of it; a nested model links to its section."""
    origin = get_origin(annotation)
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[mapping](#{_anchor(paths[annotation])})"
    if origin is Literal:
        return " | ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(_type(arg, paths) for arg in get_args(annotation))
    if origin is list:
        (item,) = get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return f"list of [mappings](#{_anchor(paths[item])})"
        return "list of " + _type(item, paths) + "s"
    if origin is dict:
        key, value = get_args(annotation)
        return "mapping" if value is Any else f"mapping of {_type(key, paths)} to {_type(value, paths)}"
    if origin is Annotated:
        base, *metadata = get_args(annotation)
        limits = _limits(metadata)
        return _type(base, paths) + (f" ({limits})" if limits else "")
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _limits(metadata: list[Any]) -> str:
    """A field's constraints in words: `> 0, ≤ 60`, `at least 8 characters`, `matching ^https?://`."""
    out = []
    for item in metadata:
        if isinstance(item, annotated_types.Gt):
            out.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Ge):
            out.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Lt):
            out.append(f"< {item.lt}")
        elif isinstance(item, annotated_types.Le):
            out.append(f"≤ {item.le}")
        elif isinstance(item, annotated_types.MinLen):
            out.append("not empty" if item.min_length == 1 else f"at least {item.min_length} characters")
        elif getattr(item, "pattern", None):
            out.append(f"matching `{item.pattern}`")
    return ", ".join(out)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "see its section"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        value = [item.model_dump(mode="json", exclude_defaults=True) for item in value]
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _description(field: FieldInfo) -> str:
    text = field.description
    if text is None:
        nested = _model_of(field.annotation)
        text = nested.__doc__ if nested is not None else ""
    limits = _limits(field.metadata)
    text = _one_line(text or "")
    return f"{text} ({limits})" if limits else text


def _one_line(text: str) -> str:
    return " ".join(text.split())
