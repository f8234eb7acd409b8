"""Security headers on every response: pages, errors, the JSON API, static files and /docs.

Pages run no inline scripts: ``default-src 'none'`` with scripts, styles and images from this
origin only (MathML is markup, the templates use no inline styles, and the scripts in
``static/``, the exam countdown, the start and answer buttons sent once and the rest, are
optional: pages work without them). A response that sets its own
Content-Security-Policy keeps it: /docs (Swagger UI from local assets) allows its bundle and its
one inline start-up script, the latter by hash. In production every response also carries
``Strict-Transport-Security`` (``HSTS_MAX_AGE_S``).
"""

from __future__ import annotations

import base64
import hashlib
import re

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": PAGE_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def docs_csp(page: str) -> str:
    """The policy for a Swagger UI page: its local assets, and its inline scripts by hash."""
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"
        for script in _INLINE_SCRIPT.findall(page)
    )
    return (
        f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    )


def security_headers(hsts_max_age_s: int = 0) -> list[tuple[bytes, bytes]]:
    """``SECURITY_HEADERS`` as raw response headers, added by the request context
    (app.observability.request_context.RequestContextMiddleware) to every HTTP response that does not set them
    itself.

    ``hsts_max_age_s`` > 0 (production) adds ``Strict-Transport-Security`` too: browsers that
    reached the site over HTTPS once will not use plain HTTP for it again for that long.
    """
    headers = dict(SECURITY_HEADERS)
    if hsts_max_age_s > 0:
        headers["Strict-Transport-Security"] = f"max-age={hsts_max_age_s}; includeSubDomains"
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]
