"""Identity: learners (guests, app installs, accounts), passwords, web sessions, API tokens, roles.

Both the JSON API (bearer tokens only) and the web pages (a server-side session behind an
HttpOnly cookie) authenticate through this package.
"""
