"""The process's log lines: uvicorn's text format, or one JSON object per line (`--log-format json`) naming the run,
conversation, question and trace a line is about. Lines carry ids and names, never a token, a code or an answer."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import orjson

from elicithub import logfields, telemetry

_ACCESS_ARGS = ("client", "method", "path", "http_version", "status")
"""uvicorn's access lines log these as their arguments (`%s - "%s %s HTTP/%s" %d`)."""


class JsonFormatter(logging.Formatter):
    """`ts`, `level`, `logger`, `msg`, then what is known of the context, and an access line's request."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(logfields.current())
        line.update((name, getattr(record, name)) for name in logfields.NAMES if hasattr(record, name))
        trace_id = telemetry.current_trace_id()
        if trace_id is not None:
            line["trace_id"] = trace_id
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) == 5:
            line.update(zip(_ACCESS_ARGS, record.args, strict=True))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def log_config(kind: str) -> dict[str, Any]:
    """uvicorn's `log_config` for `text` or `json`; the hub's own loggers (`elicithub.*`) log at INFO beside it."""
    text = kind != "json"
    formatters: dict[str, Any] = (
        {
            "default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": "%(levelprefix)s %(message)s"},
            "access": {
                "()": "uvicorn.logging.AccessFormatter",
                "fmt": '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s',
            },
        }
        if text
        else {"default": {"()": JsonFormatter}, "access": {"()": JsonFormatter}}
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": formatters,
        "handlers": {
            "default": {"formatter": "default", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
            "access": {"formatter": "access", "class": "logging.StreamHandler", "stream": "ext://sys.stdout"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
            "elicithub": {"handlers": ["default"], "level": "INFO", "propagate": False},
        },
        "root": {"handlers": ["default"], "level": "WARNING"},
    }
