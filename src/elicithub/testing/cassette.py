"""Cassettes: every JSON-RPC message of one test, in a canonical YAML form that is byte-stable across recordings.

Normalized (so that two recordings of the same exchange are the same bytes):
- JSON-RPC ids: each side's request ids are renumbered 1, 2, ... in the order sent; responses follow their request.
- `requestState`: every distinct value becomes `<requestState N>` in the order the server sent it; the client's
  echo of it is written the same way, so replay matches it as an opaque token.
- Inside `_meta`: ISO 8601 timestamps become `<timestamp>`, and values of keys naming a session become `<session>`.
Session ids of streamable HTTP travel in headers, not in JSON-RPC messages, so they never reach a cassette.
"""

from __future__ import annotations

import copy
import difflib
import re
from pathlib import Path
from typing import Any, Literal, TypedDict

import yaml

from elicithub.core.jsoncodec import JsonObject
from elicithub.testing.errors import TestRunnerError

FORMAT = "elicithub-cassette/1"
Side = Literal["client", "server"]
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?")


class RawMessage(TypedDict, total=False):
    """A JSON-RPC message in its JSON form (the SDK's model dumped by alias), as a cassette keeps it."""

    jsonrpc: str
    id: str | int
    method: str
    params: JsonObject
    result: JsonObject
    error: JsonObject


class CassetteError(TestRunnerError):
    """A cassette is missing or unreadable."""


class Normalizer:
    """Rewrites one session's messages into their stable form; `adopt` registers already-stable recorded ones."""

    def __init__(self) -> None:
        self.ids: dict[Side, dict[str | int, str | int]] = {"client": {}, "server": {}}
        self.states: dict[str, str] = {}

    def normalize(self, side: Side, message: RawMessage) -> RawMessage:
        out = copy.deepcopy(message)
        other: Side = "server" if side == "client" else "client"
        if "id" in out and "method" in out:
            out["id"] = self.ids[side].setdefault(out["id"], len(self.ids[side]) + 1)
        elif "id" in out:
            out["id"] = self.ids[other].get(out["id"], out["id"])
        result = out.get("result")
        if isinstance(result, dict) and isinstance(result.get("requestState"), str):
            state = result["requestState"]
            result["requestState"] = self.states.setdefault(state, f"<requestState {len(self.states) + 1}>")
        params = out.get("params")
        if isinstance(params, dict) and isinstance(params.get("requestState"), str):
            params["requestState"] = self.states.get(params["requestState"], params["requestState"])
        stable: RawMessage = _volatile_meta(out)
        return stable

    def adopt(self, message: RawMessage) -> None:
        """A recorded server message is sent as is on replay: its ids and states then stand for themselves."""
        if "id" in message and "method" in message:
            self.ids["server"][message["id"]] = message["id"]
        result = message.get("result")
        if isinstance(result, dict) and isinstance(result.get("requestState"), str):
            self.states[result["requestState"]] = result["requestState"]

    def client_id(self, stable: str | int) -> str | int:
        """The id the client really used for the request recorded as `stable`."""
        return next((real for real, n in self.ids["client"].items() if n == stable), stable)


def _volatile_meta(node: Any, inside_meta: bool = False) -> Any:
    if isinstance(node, dict):
        out: JsonObject = {}
        for key, value in node.items():
            meta = inside_meta or key == "_meta"
            if meta and "session" in key.lower() and isinstance(value, str):
                out[key] = "<session>"
            else:
                out[key] = _volatile_meta(value, meta)
        return out
    if isinstance(node, list):
        return [_volatile_meta(item, inside_meta) for item in node]
    if inside_meta and isinstance(node, str) and _TIMESTAMP.fullmatch(node):
        return "<timestamp>"
    return node


def dump(data: Any) -> str:
    """The canonical YAML text: sorted keys, block style, no line folding, unicode as is."""
    return yaml.safe_dump(data, sort_keys=True, allow_unicode=True, default_flow_style=False, width=1_000_000)


def cassette_path(directory: Path, suite: Path, test: str) -> Path:
    """One file per test: DIR/<suite name>/<test name as a slug>.yaml."""
    stem = suite.name.split(".")[0] or "suite"
    slug = re.sub(r"[^a-z0-9]+", "-", test.lower()).strip("-") or "test"
    return directory / stem / f"{slug}.yaml"


def write_cassette(path: Path, suite: Path, test: str, messages: list[tuple[Side, RawMessage]]) -> None:
    data = {"format": FORMAT, "suite": suite.name, "test": test, "messages": [{s: m} for s, m in messages]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(data), encoding="utf-8")


def read_cassette(path: Path) -> list[tuple[Side, RawMessage]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CassetteError(f"no cassette at {path}; record one with --record") from None
    except (OSError, yaml.YAMLError) as exc:
        raise CassetteError(f"cannot read the cassette {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("messages"), list):
        raise CassetteError(f"{path} is not an {FORMAT} cassette")
    messages: list[tuple[Side, RawMessage]] = []
    for item in data["messages"]:
        [(side, message)] = item.items()
        messages.append((side, message))
    return messages


def diff(recorded: RawMessage | None, sent: RawMessage, position: int) -> str:
    """A unified diff of what the recording expects the client to send next against what it sent."""
    before = dump(recorded).splitlines() if recorded is not None else []
    after = dump(sent).splitlines()
    where = f"message {position}" if recorded is not None else f"message {position} (past the end of the recording)"
    lines = difflib.unified_diff(before, after, f"recorded {where}", "sent", lineterm="")
    return "\n".join(lines)
