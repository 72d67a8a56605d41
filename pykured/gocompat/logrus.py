"""Logging in kured's formats (sirupsen/logrus): logrus text (``time="…" level=info msg="…"``) or logrus JSON.

kured logs through logrus. Operators alert on its lines (``Reboot blocked: …``, ``Lock already held: …``), so
pykured writes the same shape: the text formatter quotes a value only when logrus would (with Go's ``%q``),
levels are logrus names (``warning``, not ``warn``), and JSON keys are sorted as Go's ``encoding/json`` sorts
map keys. Extra structured fields passed as ``extra={"fields": {...}}`` are rendered as logrus fields.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import sys
from typing import Any, TextIO

from pykured.gocompat.goflags import go_quote

_LEVELS = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "fatal",
}
_GO_JSON_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)
"""Go's ``encoding/json`` escapes these inside strings (logrus keeps HTML escaping on)."""
_SAFE = re.compile(r"^[A-Za-z0-9\-._/@^+]+$")


def _logrus_value(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if _SAFE.match(text) else go_quote(text)


def _timestamp(record: logging.LogRecord) -> str:
    """Go's ``time.RFC3339`` in the local zone (``TZ``), as logrus: ``Z`` for a zero offset."""
    moment = datetime.datetime.fromtimestamp(record.created).astimezone()
    offset = moment.utcoffset() or datetime.timedelta(0)
    if not offset:
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    minutes = int(abs(offset).total_seconds()) // 60
    sign = "-" if offset < datetime.timedelta(0) else "+"
    return f"{moment.strftime('%Y-%m-%dT%H:%M:%S')}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


def _message(record: logging.LogRecord) -> str:
    message = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        message = f"{message}: {record.exc_info[1]}"
    return message


class LogrusTextFormatter(logging.Formatter):
    """``time="2026-06-30T11:29:16Z" level=info msg="Reboot required" node=worker-1``."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            f"time={_logrus_value(_timestamp(record))}",
            f"level={_LEVELS.get(record.levelno, 'info')}",
            f"msg={_logrus_value(_message(record))}",
        ]
        parts.extend(f"{key}={_logrus_value(val)}" for key, val in sorted(_fields(record).items()))
        return " ".join(parts)


class LogrusJSONFormatter(logging.Formatter):
    """``{"level":"info","msg":"Reboot required","time":"2026-06-30T11:29:16Z"}``."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = _fields(record)
        data.update(level=_LEVELS.get(record.levelno, "info"), msg=_message(record), time=_timestamp(record))
        text = json.dumps(dict(sorted(data.items())), separators=(",", ":"), ensure_ascii=False, default=str)
        return text.translate(_GO_JSON_ESCAPES)


def configure(log_format: str = "text", level: str = "info", stream: TextIO | None = None) -> None:
    """Send logs to ``stream`` (stderr) in kured's format: ``json`` selects JSON, anything else text."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(LogrusJSONFormatter() if log_format == "json" else LogrusTextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    for noisy in ("urllib3", "kubernetes", "watchdog", "apprise"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
