"""Settings: environment variables, the default SQLite file, the secret key."""

from __future__ import annotations

import stat

import pytest
from pydantic import ValidationError

from app.config import ROOT, Settings, resolve_secret_key


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("DATABASE_URL", "SECRET_KEY", "ENVIRONMENT", "DATA_DIR", "CARDS_DIR", "PORT"):
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_sqlite_in_the_data_folder_and_the_repository_cards():
    settings = Settings()
    assert settings.database_url == f"sqlite:///{(ROOT / 'data' / 'infracards.db').resolve()}"
    assert settings.cards_dir == ROOT / "cards"
    assert settings.environment == "development"


def test_environment_variables_are_honoured(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u@db/x")
    monkeypatch.setenv("PORT", "9001")
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    settings = Settings()
    assert settings.database_url == "postgresql+psycopg://u@db/x"
    assert settings.port == 9001
    assert settings.data_dir == tmp_path


def test_the_default_database_follows_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    assert Settings().database_url == f"sqlite:///{(tmp_path / 'infracards.db').resolve()}"


def test_secret_key_from_the_environment_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("SECRET_KEY", "from-the-environment-" + "x" * 20)
    settings = Settings(data_dir=tmp_path)
    assert resolve_secret_key(settings) == "from-the-environment-" + "x" * 20
    assert not (tmp_path / "secret_key").exists()


def test_a_development_key_is_generated_once_into_the_data_folder(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    key = resolve_secret_key(settings)
    path = tmp_path / "data" / "secret_key"
    assert len(key) >= 32 and path.read_text().strip() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_secret_key(Settings(data_dir=tmp_path / "data")) == key
    assert [p.name for p in path.parent.iterdir()] == ["secret_key"]


def test_production_refuses_a_missing_or_short_secret_key(monkeypatch):
    monkeypatch.setenv("ENVIRONMENT", "production")
    with pytest.raises(ValidationError, match="SECRET_KEY"):
        Settings()
    monkeypatch.setenv("SECRET_KEY", "short")
    with pytest.raises(ValidationError, match="SECRET_KEY"):
        Settings()
    monkeypatch.setenv("SECRET_KEY", "k" * 40)
    assert Settings().environment == "production"


def test_cookies_are_secure_in_production_or_when_asked(monkeypatch):
    assert Settings().secure_cookies is False
    assert Settings(cookie_secure=True).secure_cookies is True
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SECRET_KEY", "k" * 40)
    assert Settings().secure_cookies is True


def test_invalid_settings_are_one_line_naming_each_variable_never_its_value(monkeypatch):
    """An operator's mistake in the environment is one line that names the variables; pydantic's
    report quoted what was given (a short SECRET_KEY, a DATABASE_URL with its password) over
    several lines with help links."""
    from app.config import SettingsError, get_settings

    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SECRET_KEY", "short-secret-value")
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u:db-password-value@127.0.0.1/x")
    get_settings.cache_clear()
    try:
        with pytest.raises(SettingsError) as refused:
            get_settings()
        monkeypatch.setenv("SECRET_KEY", "k" * 40)
        monkeypatch.setenv("DB_POOL_SIZE", "lots")
        monkeypatch.setenv("SQLITE_SYNCHRONOUS", "off")
        get_settings.cache_clear()
        with pytest.raises(SettingsError) as fields:
            get_settings()
    finally:
        get_settings.cache_clear()
    message = str(refused.value)
    assert message.startswith("invalid settings: SECRET_KEY must be set to at least 32")
    assert "\n" not in message and "short-secret-value" not in message
    assert "db-password-value" not in message and "errors.pydantic.dev" not in message
    assert str(fields.value) == (
        "invalid settings: SQLITE_SYNCHRONOUS: Input should be 'normal' or 'full'; "
        "DB_POOL_SIZE: Input should be a valid integer, unable to parse string as an integer"
    )


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("DATABASE_URL", "not a url", "DATABASE_URL: not a database URL such as"),
        ("DATABASE_URL", "nosuchdb://u:pw-value@h/x", "DATABASE_URL: SQLAlchemy has no database"),
        ("DATABASE_URL", "mysql://u:pw-value@h/x", "DATABASE_URL: the driver for mysql is not"),
        ("REDIS_URL", "127.0.0.1:6379", "REDIS_URL: not a storage URL such as redis://"),
        ("RATE_LIMIT_STORAGE", "bogus://x", "RATE_LIMIT_STORAGE: not a storage URL"),
        ("LOG_LEVEL", "LOUD", "LOG_LEVEL: not a log level"),
    ],
)
def test_unusable_urls_and_levels_are_refused_as_settings(monkeypatch, name, value, words):
    """These reached the engine, the rate limiter or logging and stopped the server with a
    traceback (the CLI too, for a DATABASE_URL whose driver is missing)."""
    from app.config import SettingsError, get_settings

    monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        with pytest.raises(SettingsError) as refused:
            get_settings()
    finally:
        get_settings.cache_clear()
    assert str(refused.value).startswith(f"invalid settings: {words}")
    assert "pw-value" not in str(refused.value)


def test_usable_urls_and_levels_pass(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u:p@127.0.0.1:5432/x")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("LOG_LEVEL", "warning")
    settings = Settings()
    assert settings.rate_limit_storage == "redis://127.0.0.1:6379/0"
    assert settings.log_level == "WARNING"
