"""The command line: migrate and check-cards, with plain messages and exit codes on bad input."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import CARDS_DIR, ROOT
from sqlalchemy import inspect

from app.cli import main
from app.config import get_settings
from app.db import make_engine


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch, tmp_path):
    """Settings come from the environment: point it at a temporary data folder."""
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("CARDS_DIR", str(CARDS_DIR))
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_migrate_creates_the_data_folder_and_the_default_sqlite_database(tmp_path, capsys):
    assert main(["migrate"]) == 0
    db_file = tmp_path / "data" / "infracards.db"
    assert db_file.is_file()
    engine = make_engine(f"sqlite:///{db_file}")
    assert "attempts" in inspect(engine).get_table_names()
    engine.dispose()
    # The revision the database is at, by its id (the one no migration file revises), not "head".
    heads = {
        line.split("=", 1)[1].strip().strip("\"'")
        for path in (ROOT / "migrations" / "versions").glob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("revision")
    }
    downs = {
        line.split("=", 1)[1].strip().strip("\"'")
        for path in (ROOT / "migrations" / "versions").glob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("down_revision")
    }
    (head,) = heads - downs
    assert capsys.readouterr().out.strip().endswith(f"is at revision {head}")


def test_migrate_honours_database_url(tmp_path, monkeypatch):
    target = tmp_path / "elsewhere" / "db.sqlite"
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{target}")
    get_settings.cache_clear()
    assert main(["migrate"]) == 0
    assert target.is_file()
    assert not (tmp_path / "data" / "infracards.db").exists()


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("not a url", "invalid DATABASE_URL"),
        ("nosuchdb://x/y", "invalid DATABASE_URL"),
        ("postgresql+psycopg://nobody@127.0.0.1:1/none", "migration failed"),
    ],
)
def test_migrate_with_a_bad_database_url_prints_a_message_and_fails(url, words, capsys):
    assert main(["migrate", "--database-url", url]) == 1
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_a_wrong_setting_is_one_line_naming_it_without_its_value(monkeypatch, capsys):
    monkeypatch.setenv("ENVIRONMENT", "production")
    monkeypatch.setenv("SECRET_KEY", "short-secret-value")
    assert main(["migrate"]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("error: invalid settings: SECRET_KEY must be set") and err.count("\n") == 1
    )
    assert "short-secret-value" not in err


def test_check_cards_prints_a_summary(capsys):
    assert main(["check-cards"]) == 0
    out = capsys.readouterr().out
    assert (
        "zero-memory-offload" in out
        and "exam points" in out
        and out.rstrip().endswith(str(CARDS_DIR))
    )


def test_check_cards_reports_a_broken_card_on_stderr(tmp_path, capsys):
    broken = tmp_path / "cards"
    shutil.copytree(CARDS_DIR, broken, ignore=shutil.ignore_patterns("demo-results"))
    path = broken / "zero-memory-offload.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["points"][0]["title"] = "not a text in two languages"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    assert main(["check-cards", "--cards-dir", str(broken)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "zero-memory-offload" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "nested",
    ["[" * 5000 + "]" * 5000, "{a: " * 3000 + "1" + "}" * 3000, "\n  " + "- " * 3000 + "1"],
)
def test_a_card_nested_thousands_deep_is_a_one_line_error(tmp_path, capsys, nested):
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "deep.yaml").write_text(f"id: deep\nversion: 1\nx: {nested}\n", encoding="utf-8")
    assert main(["check-cards", "--cards-dir", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: deep.yaml: nested too deeply") and "Traceback" not in err
    assert err.count("\n") == 1


def test_a_card_that_is_not_yaml_is_a_one_line_error_saying_where(tmp_path, capsys):
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "bad.yaml").write_text("id: bad\nx: - - 1\n", encoding="utf-8")
    assert main(["check-cards", "--cards-dir", str(folder)]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == "error: bad.yaml: not valid YAML: sequence entries are not allowed here (line 2, column 4)\n"
    )


# Nine levels of nine aliases: 300 bytes that read as 9**9 (387 million) strings.
ALIAS_BOMB = (
    "id: bomb\nversion: 1\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    + "".join(
        f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
)


def test_a_yaml_alias_bomb_is_a_one_line_error_at_once(tmp_path):
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "bomb.yaml").write_text(ALIAS_BOMB, encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "DATA_DIR": str(tmp_path / "data"), "CARDS_DIR": str(folder)}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "check-cards"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,  # it ran at full CPU for minutes
    )
    assert result.returncode == 1
    assert result.stderr == (
        "error: bomb.yaml: line 3: YAML anchors and aliases are not allowed in a card file: "
        "write each value out\n"
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("id: a\nversion: 1\ntitle: &t {en: A, zh: A}\n", 3),  # an anchor alone
        ("id: a\nversion: 1\n\nx: !!str &n 1\ny: [1, *n]\n", 4),
    ],
)
def test_a_card_file_with_an_anchor_or_alias_is_refused_naming_the_line(tmp_path, text, line):
    from app.domain.cards import CardError, read_card

    (tmp_path / "a.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(CardError) as refused:
        read_card(tmp_path / "a.yaml")
    assert str(refused.value) == (
        f"a.yaml: line {line}: YAML anchors and aliases are not allowed in a card file: write "
        "each value out"
    )


def test_the_shipped_cards_use_no_anchor_or_alias():
    for path in sorted(CARDS_DIR.glob("*.yaml")):
        events = yaml.parse(path.read_text("utf-8"), Loader=yaml.SafeLoader)
        assert not any(
            isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in events
        ), path.name


def test_check_cards_with_a_missing_folder_fails_with_a_message(tmp_path, capsys):
    assert main(["check-cards", "--cards-dir", str(tmp_path / "nope")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_unknown_commands_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_python_m_app_cli_runs_as_a_module(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "DATA_DIR": str(tmp_path / "data"),
        "CARDS_DIR": str(tmp_path / "none"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "check-cards"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr


def test_ctrl_c_is_one_line_and_status_130_not_a_traceback(monkeypatch, capsys):
    """Ctrl-C during check-cards (seconds of validation) printed a KeyboardInterrupt traceback."""
    import app.cli.commands as commands

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "check_cards", interrupted)
    assert main(["check-cards"]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"


def test_a_database_that_cannot_be_reached_is_not_told_to_migrate(tmp_path, monkeypatch, capsys):
    """create-user and export-card said '(is the database migrated?)' after 'Connection
    refused'; that hint is for a database without its tables."""
    monkeypatch.setattr("sys.stdin", io.StringIO("a-password-long-enough\n"))
    down = "postgresql+psycopg://postgres@127.0.0.1:1/none"
    args = ["create-user", "--email", "a@example.com", "--password-stdin", "--database-url", down]
    assert main(args) == 1
    assert main(["export-card", "--card", "zero-memory-offload", "--database-url", down]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all("Connection refused" in line for line in lines), lines
    assert not any("migrated" in line for line in lines)
    unmigrated = f"sqlite:///{tmp_path / 'empty.db'}"
    assert main(["export-card", "--card", "zero-memory-offload", "--database-url", unmigrated]) == 1
    assert "(is the database migrated?)" in capsys.readouterr().err


def test_ctrl_c_while_the_command_loads_is_one_line_not_a_traceback():
    """Ctrl-C in the first moments of a command (its modules loading, before main runs) ended
    in a traceback; it is the same one line and status 130 as later."""
    code = (
        "import runpy, sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'app.cli.commands':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "runpy.run_module('app.cli', run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stderr) == (130, "error: interrupted\n")
