"""Notifications: kured's drain/reboot/uncordon messages sent to its shoutrrr-syntax ``--notify-url``.

kured calls ``shoutrrr.Send(url, fmt.Sprintf(template, node))`` synchronously and only logs ``Error notifying:
<err>`` as a warning when it fails. :class:`Notifier` does the same and never raises, with two safety nets
kured lacks: every send is bounded by a timeout (it runs in a worker thread that is abandoned when it
overruns) and URLs in log lines are redacted. URLs are converted by :mod:`pykured.notify.shoutrrr`; apprise is
imported lazily, only when a URL is configured, and only the one plugin module the URL needs (a full
``apprise.Apprise().add()`` loads ~150 plugins; ``benchmarks/notify_memory.py`` measures it). Native requests
use urllib.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from pykured.core.errors import ConfigError, NotifyError
from pykured.gocompat.gofmt import sprintf
from pykured.notify import shoutrrr
from pykured.notify.redact import REDACTED, redact_url
from pykured.notify.shoutrrr import AppriseTarget, Destination, NativeRequest
from pykured.notify.shoutrrr.common import parse as parse_url

__all__ = ["KuredMessages", "Notifier", "notify_test"]

logger = logging.getLogger("pykured.notify")

# apprise scheme -> (module under apprise.plugins, class): import one plugin instead of all of them.
_PLUGINS: dict[str, tuple[str, str]] = {
    "slack": ("slack", "NotifySlack"),
    "discord": ("discord", "NotifyDiscord"),
    "tgram": ("telegram", "NotifyTelegram"),
    "mailto": ("email", "NotifyEmail"),
    "mailtos": ("email", "NotifyEmail"),
    "rocket": ("rocketchat", "NotifyRocketChat"),
    "rockets": ("rocketchat", "NotifyRocketChat"),
    "mmost": ("mattermost", "NotifyMattermost"),
    "mmosts": ("mattermost", "NotifyMattermost"),
    "pover": ("pushover", "NotifyPushover"),
    "gotify": ("gotify", "NotifyGotify"),
    "gotifys": ("gotify", "NotifyGotify"),
    "gchat": ("google_chat", "NotifyGoogleChat"),
    "ntfy": ("ntfy", "NotifyNtfy"),
    "ntfys": ("ntfy", "NotifyNtfy"),
    "json": ("custom_json", "NotifyJSON"),
    "jsons": ("custom_json", "NotifyJSON"),
    "matrix": ("matrix", "NotifyMatrix"),
    "matrixs": ("matrix", "NotifyMatrix"),
    "opsgenie": ("opsgenie", "NotifyOpsgenie"),
    "zulip": ("zulip", "NotifyZulip"),
    "pbul": ("pushbullet", "NotifyPushBullet"),
    "join": ("join", "NotifyJoin"),
    "ifttt": ("ifttt", "NotifyIFTTT"),
    "bark": ("bark", "NotifyBark"),
    "barks": ("bark", "NotifyBark"),
    "workflow": ("workflows", "NotifyWorkflows"),
    "workflows": ("workflows", "NotifyWorkflows"),
}


@dataclass(frozen=True, slots=True)
class KuredMessages:
    """kured's ``--message-template-*`` flags, rendered with Go ``fmt`` semantics (``%s`` = node)."""

    drain: str = "Draining node %s"
    reboot: str = "Rebooting node %s"
    uncordon: str = "Node %s rebooted & uncordoned successfully!"

    def for_drain(self, node: str) -> str:
        return sprintf(self.drain, node)

    def for_reboot(self, node: str) -> str:
        return sprintf(self.reboot, node)

    def for_uncordon(self, node: str) -> str:
        return sprintf(self.uncordon, node)


def _secrets(url: str) -> tuple[str, ...]:
    """Every part of ``url`` that may be a secret (userinfo, path segments, query values)."""
    try:
        parsed = parse_url(url)
    except ConfigError:
        return (url,)
    parts = [parsed.username or "", parsed.password or "", parsed.fragment, url]
    parts += [s for s in parsed.path.split("/") if s] + [v for _, v in parsed.query]
    return tuple(sorted({p for p in parts if len(p) >= 4}, key=len, reverse=True))


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


@dataclass(slots=True)
class _Route:
    """One configured URL: its destination (or the conversion error) and, once built, the apprise plugin."""

    shown: str
    secrets: tuple[str, ...]
    destination: Destination | None
    error: ConfigError | None = None
    plugin: Any = field(default=None)


class Notifier:
    """Sends kured's notifications; :meth:`send` never raises and returns whether every URL succeeded."""

    def __init__(
        self,
        *,
        urls: Sequence[str] = (),
        timeout: float = 10.0,
        messages: KuredMessages | None = None,
        on_failure: Callable[[str], None] | None = None,
        strict: bool = False,
    ) -> None:
        """``strict`` raises :class:`ConfigError` for an unusable URL; otherwise (kured) every send warns."""
        self._timeout = timeout
        self._messages = messages or KuredMessages()
        self._on_failure = on_failure
        self._lock = threading.Lock()
        self.last_error = ""
        self._routes: list[_Route] = []
        for url in urls:
            try:
                destination: Destination | None = shoutrrr.convert(url)
                error = None
            except ConfigError as exc:
                if strict:
                    raise
                destination, error = None, exc
                logger.warning("Invalid notification URL %s: %s", redact_url(url), exc)
            self._routes.append(_Route(redact_url(url), _secrets(url), destination, error))

    @classmethod
    def from_urls(
        cls,
        *,
        notify_url: str = "",
        slack_hook_url: str = "",
        extra_urls: Sequence[str] = (),
        timeout: float = 10.0,
        messages: KuredMessages | None = None,
        on_failure: Callable[[str], None] | None = None,
    ) -> Notifier:
        """kured's ``validateNotificationURL``: ``--notify-url`` wins over ``--slack-hook-url``."""
        url = shoutrrr.strip_quotes(notify_url)
        if url and slack_hook_url:
            logger.warning(
                "Cannot use both --notify-url (given: %s) and --slack-hook-url (given: %s) flags. "
                "Kured will only use --notify-url flag",
                redact_url(url),
                redact_url(slack_hook_url),
            )
        elif slack_hook_url:
            logger.warning("Deprecated flag(s). Please use --notify-url flag instead.")
            try:
                url = shoutrrr.slack_hook_to_url(slack_hook_url)
            except ConfigError as exc:
                logger.error("Slack hook URL %s is not usable: %s", redact_url(slack_hook_url), exc)
        urls = [u for u in (url, *extra_urls) if u]
        return cls(urls=urls, timeout=timeout, messages=messages, on_failure=on_failure)

    @property
    def enabled(self) -> bool:
        return bool(self._routes)

    @property
    def destinations(self) -> tuple[str, ...]:
        """The configured URLs, redacted."""
        return tuple(route.shown for route in self._routes)

    def notify_drain(self, node: str) -> bool:
        return self.send(self._messages.for_drain(node))

    def notify_reboot(self, node: str) -> bool:
        return self.send(self._messages.for_reboot(node))

    def notify_uncordon(self, node: str) -> bool:
        return self.send(self._messages.for_uncordon(node))

    def send(self, message: str, *, title: str | None = None) -> bool:
        """Send ``message`` to every URL; on failure log ``Error notifying: …`` and return False."""
        ok = True
        with self._lock:
            for route in self._routes:
                try:
                    self._send_bounded(route, message, title)
                except NotifyError as exc:
                    ok = False
                    self.last_error = _scrub(str(exc), route.secrets)
                    logger.warning("Error notifying: %s", self.last_error)
                    if self._on_failure is not None:
                        self._on_failure(route.destination.service if route.destination else "invalid")
        return ok

    def _send_bounded(self, route: _Route, message: str, title: str | None) -> None:
        if route.destination is None:
            raise NotifyError(f"{route.shown}: {route.error}")
        outcome: list[BaseException | None] = []

        def work() -> None:
            try:
                self._deliver(route, message, title)
                outcome.append(None)
            except Exception as exc:  # any failure of a notification is only a warning
                outcome.append(exc)

        worker = threading.Thread(target=work, name="pykured-notify", daemon=True)
        worker.start()
        worker.join(self._timeout)
        if worker.is_alive():
            raise NotifyError(f"{route.destination.service}: no answer within {self._timeout:g}s")
        if outcome and outcome[0] is not None:
            error = outcome[0]
            if isinstance(error, NotifyError):
                raise error
            raise NotifyError(f"{route.destination.service}: {error}") from error

    def _deliver(self, route: _Route, message: str, title: str | None) -> None:
        destination = route.destination
        if isinstance(destination, NativeRequest):
            _send_native(destination, message, title=title, timeout=self._timeout)
        elif isinstance(destination, AppriseTarget):
            if route.plugin is None:
                route.plugin = _build_plugin(destination, timeout=self._timeout)
            _send_apprise(route.plugin, destination, message, title=title)


def _send_native(request: NativeRequest, message: str, *, title: str | None, timeout: float) -> None:
    import urllib.error  # lazy: only processes with a native destination pay for urllib/http.client/ssl
    import urllib.request

    http = urllib.request.Request(  # noqa: S310 - the scheme is http(s), built by pykured.notify.shoutrrr
        request.url,
        data=request.render(message, title=title),
        method=request.method,
        headers=dict(request.headers),
    )
    try:
        with urllib.request.urlopen(http, timeout=timeout) as response:  # noqa: S310
            response.read()
    except urllib.error.HTTPError as exc:
        exc.close()  # the error carries the open response; close its socket
        raise NotifyError(f"{request.service}: got unexpected HTTP status: {exc.code} {exc.reason}") from exc
    except OSError as exc:
        raise NotifyError(f"{request.service}: {exc}") from exc


def _build_plugin(target: AppriseTarget, *, timeout: float) -> Any:
    scheme = target.url.partition(":")[0].lower()
    module_name, class_name = _PLUGINS.get(scheme, ("", ""))
    if module_name:
        plugin_class = getattr(importlib.import_module(f"apprise.plugins.{module_name}"), class_name)
        arguments = plugin_class.parse_url(target.url)
        if not arguments:
            raise NotifyError(f"{target.service}: apprise could not parse the URL")
        plugin = plugin_class(**arguments)
    else:  # a URL in apprise's own syntax that the table does not know: let apprise find the plugin
        apprise = importlib.import_module("apprise")
        plugin = apprise.Apprise.instantiate(target.url)
        if plugin is None:
            raise NotifyError(f"unknown service {scheme!r}")
    plugin.socket_connect_timeout = timeout
    plugin.socket_read_timeout = timeout
    return plugin


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _send_apprise(plugin: Any, target: AppriseTarget, message: str, *, title: str | None) -> None:
    capture = _Capture()
    apprise_logger = logging.getLogger("apprise")
    apprise_logger.addHandler(capture)
    try:
        ok = plugin.notify(body=message, title=title if title is not None else (target.title or ""))
    finally:
        apprise_logger.removeHandler(capture)
    if not ok:
        reason = "; ".join(capture.messages[-2:]) or "apprise reported a failure"
        raise NotifyError(f"{target.service}: {reason}")


def notify_test(url: str, message: str, *, out: TextIO, timeout: float = 10.0) -> int:
    """``pykured notify-test``: show where ``url`` goes (redacted), send ``message``, exit 0 on success."""
    try:
        destination = shoutrrr.convert(url)
    except ConfigError as exc:
        print(f"cannot use {redact_url(url)}: {exc}", file=out)
        return 1
    shown = destination.url
    kind = "apprise" if isinstance(destination, AppriseTarget) else f"native {destination.method}"
    print(f"destination: {kind} {redact_url(shown)}", file=out)
    if destination.note:
        print(f"note: {destination.note}", file=out)
    notifier = Notifier(urls=[url], timeout=timeout)
    if notifier.send(message):
        print("sent", file=out)
        return 0
    print(f"failed: {notifier.last_error}", file=out)
    return 1
