"""Password hashing with Argon2id (argon2-cffi's defaults: 64 MiB, 3 passes, 4 lanes)."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024

_hasher = PasswordHasher()
# Verified against for unknown emails, so that both failures take the same time.
_DUMMY_HASH = _hasher.hash("not a password of anyone: timing equaliser")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches; an absent hash still costs one verification."""
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password) and bool(password_hash)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)
