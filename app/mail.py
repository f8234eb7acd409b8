"""Sending email (password reset links) over SMTP, in a background thread.

Requests hand work to :meth:`Mailer.submit` and answer at once: the event loop and the request's
thread never wait for an SMTP server, and a response takes the same time whatever the work then
finds (an address with an account or not). Without ``SMTP_HOST`` a development server writes
each email to the log instead (so ``make run`` shows the reset link); in production it logs
that it could not send, never the link.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from email.message import EmailMessage
from email.utils import make_msgid

from app.config import Settings

log = logging.getLogger(__name__)


class Mailer:
    """One background thread that runs submitted work (look-ups, then sending) in order."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mail")
        self._pending: set[Future[None]] = set()
        self._lock = threading.Lock()

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work`` in the mail thread; its failures are logged, never raised to a request."""
        future = self._pool.submit(_logged, work)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def wait(self, timeout_s: float = 30.0) -> None:
        """Until the work submitted so far has run (at shutdown; tests)."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.result(timeout=timeout_s)

    def send(self, message: EmailMessage) -> None:
        """Send now (in the mail thread): over SMTP, or to the log without a server."""
        settings = self.settings
        if "From" not in message:
            message["From"] = settings.mail_from
        if "Message-ID" not in message:
            message["Message-ID"] = make_msgid(domain="infracards")
        if not settings.smtp_host:
            if settings.environment == "production":
                log.error("email to %s not sent: SMTP_HOST is not set", message["To"])
                return
            log.warning(
                "SMTP_HOST is not set: this email is not sent (development).\n"
                "To: %s\nSubject: %s\n\n%s",
                message["To"],
                message["Subject"],
                message.get_content(),
            )
            return
        smtp: smtplib.SMTP
        timeout = settings.smtp_timeout_s
        if settings.smtp_security == "tls":
            smtp = smtplib.SMTP_SSL(
                settings.smtp_host,
                settings.smtp_port,
                timeout=timeout,
                context=ssl.create_default_context(),
            )
        else:
            smtp = smtplib.SMTP(settings.smtp_host, settings.smtp_port, timeout=timeout)
        with smtp:
            if settings.smtp_security == "starttls":
                smtp.starttls(context=ssl.create_default_context())
            if settings.smtp_username:
                password = (
                    settings.smtp_password.get_secret_value() if settings.smtp_password else ""
                )
                smtp.login(settings.smtp_username, password)
            smtp.send_message(message)


def _logged(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception:  # noqa: BLE001 - a mail server down must not end the mail thread
        log.exception("sending email failed")
