"""Notifications: kured's messages, its shoutrrr-syntax URLs, and the one URL redactor.

* :mod:`~pykured.notify.notifier` — :class:`Notifier` sends kured's drain/reboot/uncordon messages;
* :mod:`~pykured.notify.shoutrrr` — shoutrrr v0.8.0 URLs translated to apprise or native requests;
* :mod:`~pykured.notify.redact` — secrets in URLs hidden before they are printed.
"""

from __future__ import annotations

from pykured.notify.notifier import KuredMessages, Notifier, notify_test

__all__ = ["KuredMessages", "Notifier", "notify_test"]
