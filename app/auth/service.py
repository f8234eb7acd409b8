"""Use cases of identity: guests, accounts, passwords, web sessions, device tokens, merging.

The one place the rest of the app imports them from; each lives in the module of its concern:
:mod:`app.auth.identity` (who is asking; ids, secrets, times), :mod:`app.auth.accounts`
(registering, logging in, passwords, roles), :mod:`app.auth.tokens` (app installs and their
bearer tokens), :mod:`app.auth.web_sessions` (the browser's session and its guest) and
:mod:`app.auth.merging` (a guest's history moved into an account).
"""

from __future__ import annotations

from app.auth.accounts import (
    WRONG_CREDENTIALS,
    admit_new_learner,
    authenticate,
    change_password,
    check_exam_date,
    check_new_password,
    confirm_password,
    exam_date_of,
    normalise_email,
    register,
    set_exam_date,
    set_role,
    set_time_zone,
)
from app.auth.identity import (
    ACCOUNT,
    APP,
    GUEST,
    ROLES,
    LearnerRef,
    as_utc,
    hash_secret,
    new_id,
    new_secret,
    now_utc,
)
from app.auth.merging import merge_learner, was_merged_into
from app.auth.tokens import (
    TOKEN_CACHE_TTL_S,
    DeviceToken,
    cached_learner_for_token,
    create_app_learner,
    forget_cached_tokens,
    issue_token,
    learner_for_token,
    list_tokens,
    revoke_token,
)
from app.auth.web_sessions import (
    SESSION_LIFETIME,
    end_all_sessions,
    end_web_session,
    ensure_guest,
    learner_for_web_session,
    set_session_lang,
    start_web_session,
    visitor_for_web_session,
)

__all__ = [
    "ACCOUNT",
    "APP",
    "GUEST",
    "ROLES",
    "SESSION_LIFETIME",
    "TOKEN_CACHE_TTL_S",
    "WRONG_CREDENTIALS",
    "admit_new_learner",
    "DeviceToken",
    "LearnerRef",
    "as_utc",
    "authenticate",
    "cached_learner_for_token",
    "change_password",
    "check_exam_date",
    "check_new_password",
    "confirm_password",
    "create_app_learner",
    "end_all_sessions",
    "end_web_session",
    "ensure_guest",
    "exam_date_of",
    "forget_cached_tokens",
    "hash_secret",
    "issue_token",
    "learner_for_token",
    "learner_for_web_session",
    "visitor_for_web_session",
    "list_tokens",
    "merge_learner",
    "new_id",
    "new_secret",
    "normalise_email",
    "now_utc",
    "register",
    "revoke_token",
    "set_exam_date",
    "set_time_zone",
    "set_role",
    "set_session_lang",
    "start_web_session",
    "was_merged_into",
]
