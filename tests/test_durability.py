"""Nothing acknowledged is lost: the real server (uvicorn subprocess) is SIGKILLed under a load of
answer POSTs and restarted; every answer it acknowledged (a 200) is stored exactly once, as the
attempt it named, and resending the same client_answer_ids replays them and stores nothing new.
On SQLite (a migrated file, WAL) and on PostgreSQL (``TEST_POSTGRES_URL``).

Also the SQLite backup and restore commands: a backup taken while a server is answering holds
every answer acknowledged before it started, and a fresh server restored from it serves them.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
from conftest import ROOT
from live_servers import (
    API,
    AnswerLoad,
    bearer,
    check_exactly_once,
    new_learners,
    resend,
    running,
    server_env,
    stored_attempts,
)
from sqlalchemy.engine import make_url

from app.cli import migrate

KILL_AFTER = 60  # acknowledged answers before the SIGKILL
LEARNERS = 6


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return request.getfixturevalue("db_url")  # a copy of a migrated SQLite file
    url = request.getfixturevalue("pg_url")
    migrate(url)
    return url


def test_sigkill_under_load_loses_and_duplicates_no_acknowledged_answer(
    database_url: str, tmp_path: Path
) -> None:
    env = server_env(tmp_path / "data", database_url)
    with running(env, tmp_path / "first.log") as server:
        learners = new_learners(server.url, LEARNERS)
        load = AnswerLoad([server.url], learners, threads=12).start()
        try:
            load.wait_acked(KILL_AFTER)
            server.kill()  # mid-load: requests are in flight
        finally:
            load.stop()
        assert not load.failures, load.failures[:5]
    acked, sent = dict(load.acked), set(load.sent)
    assert len(acked) >= KILL_AFTER and len(sent) > len(acked) - 1

    if make_url(database_url).get_backend_name() == "sqlite":
        path = make_url(database_url).database
        with sqlite3.connect(path) as conn:  # recovers the WAL left by the kill
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    with running(env, tmp_path / "second.log") as server:
        check_exactly_once(database_url, acked, sent)
        before, before_ids = stored_attempts(database_url)
        # The client resends everything it sent: acknowledged ones replay, the ones cut off by
        # the kill are stored now (or replay, when they had been committed).
        results = resend(server.url, [load.sent[cid] for cid in sorted(sent)])
        for cid, attempt_id in acked.items():
            assert results[cid]["replayed"] is True and results[cid]["attempt_id"] == attempt_id
        counts, ids = check_exactly_once(database_url, acked, sent)
        assert set(counts) == sent  # each sent answer is now stored, once
        # Nothing stored before the resend changed or was stored again.
        assert all(ids[cid] == before_ids[cid] and counts[cid] == 1 for cid in before)
        new_rows = set(counts) - set(before)
        assert new_rows <= sent - set(acked)  # only answers that had never been acknowledged
        # Learners and their tokens survived too: each one's history is served.
        with server.client() as client:
            seen = 0
            for learner in learners:
                page = client.get(f"{API}/me/attempts", headers=bearer(learner))
                assert page.status_code == 200, page.text
                seen += len(page.json()["items"])
            assert seen > 0
    print(
        f"\n{make_url(database_url).get_backend_name()}: {len(acked)} acknowledged before the "
        f"SIGKILL, {len(load.unanswered)} cut off, {len(sent)} sent; after restart all "
        f"{len(acked)} stored once, {len(new_rows)} stored on resend"
    )


# --- backup and restore -------------------------------------------------------------------------


def cli(
    *args: str, database_url: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "SQLITE_SYNCHRONOUS")}
    env["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin,
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_a_backup_under_load_restores_into_a_fresh_server_with_every_earlier_answer(
    db_url: str, tmp_path: Path
) -> None:
    backup = tmp_path / "backups" / "infracards-backup.db"
    backup.parent.mkdir()
    env = server_env(tmp_path / "data", db_url)
    with running(env, tmp_path / "live.log") as server:
        learners = new_learners(server.url, LEARNERS)
        load = AnswerLoad([server.url], learners, threads=8).start()
        try:
            load.wait_acked(40)
            before_backup = load.snapshot()
            started = time.monotonic()
            result = cli("backup", str(backup), database_url=db_url)
            took = time.monotonic() - started
            acked_during = sum(1 for t in load.acked_at if t >= started)
            load.wait_acked(len(load.acked) + 5)  # the server kept answering
        finally:
            load.stop()
        assert result.returncode == 0, result.stderr
        assert "backed up" in result.stdout
        assert not load.failures, load.failures[:5]
        all_acked = dict(load.acked)

    with sqlite3.connect(backup) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # Consistent: every first answer in the copy has the review log it was stored with.
        orphans = conn.execute(
            "SELECT count(*) FROM attempts a WHERE a.first_answer AND NOT EXISTS "
            "(SELECT 1 FROM review_logs r WHERE r.attempt_id = a.id)"
        ).fetchone()[0]
        assert orphans == 0
    for suffix in ("-wal", "-shm"):
        assert not Path(f"{backup}{suffix}").exists()

    fresh = tmp_path / "restored" / "infracards.db"
    fresh_url = f"sqlite:///{fresh}"
    restored = cli("restore", str(backup), database_url=fresh_url)
    assert restored.returncode == 0, restored.stderr
    assert "restored" in restored.stdout

    counts, ids = stored_attempts(fresh_url)
    missing = [cid for cid in before_backup if counts[cid] != 1]
    assert not missing, f"{len(missing)} answers acknowledged before the backup are not in it"
    assert all(ids[cid] == before_backup[cid] for cid in before_backup)
    assert set(counts) <= set(load.sent) and all(n == 1 for n in counts.values())

    with running(server_env(tmp_path / "data2", fresh_url), tmp_path / "restored.log") as server:
        # The restored server knows the learners and replays their answers.
        earlier = [load.sent[cid] for cid in sorted(before_backup)[:20]]
        results = resend(server.url, earlier)
        assert all(results[a.client_answer_id]["replayed"] for a in earlier)
        assert all(
            results[a.client_answer_id]["attempt_id"] == before_backup[a.client_answer_id]
            for a in earlier
        )
        after, _ = stored_attempts(fresh_url)
        assert after == counts
    print(
        f"\nbackup under load: {len(before_backup)} acknowledged before it, all restored; "
        f"{len(counts)} in the backup; {acked_during} acknowledged while it ran ({took:.2f} s "
        f"including the CLI start), {len(all_acked)} in all"
    )


def run_main(
    capsys: pytest.CaptureFixture[str], *args: str, database_url: str
) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (its refusals need no server): status, stdout, stderr."""
    from app.cli import main

    capsys.readouterr()
    code = main([*args, "--database-url", database_url])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)


def test_restore_refuses_a_non_empty_database_without_force(
    db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.auth.service import create_app_learner
    from app.db import make_engine, make_sessionmaker

    run = partial(run_main, capsys)
    backup = tmp_path / "copy.db"
    assert run("backup", str(backup), database_url=db_url).returncode == 0
    # The target now holds a learner that the backup does not have.
    engine = make_engine(db_url)
    with make_sessionmaker(engine)() as db:
        create_app_learner(db=db)
    engine.dispose()
    refused = one_line_error(run("restore", str(backup), database_url=db_url))
    assert "--force" in refused and "not empty" in refused
    forced = run("restore", str(backup), "--force", database_url=db_url)
    assert forced.returncode == 0, forced.stderr
    with sqlite3.connect(make_url(db_url).database) as conn:
        assert conn.execute("SELECT count(*) FROM learners").fetchone()[0] == 0
    # Backing up onto an existing file is refused too, unless --force.
    again = one_line_error(run("backup", str(backup), database_url=db_url))
    assert "exists" in again and "--force" in again
    assert run("backup", str(backup), "--force", database_url=db_url).returncode == 0


def test_restore_checks_the_file_and_backup_refuses_postgresql(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = partial(run_main, capsys)
    target = f"sqlite:///{tmp_path / 'target.db'}"
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not a database\n")
    refused = one_line_error(run("restore", str(text_file), database_url=target))
    assert "not a SQLite database" in refused
    assert "no such file" in one_line_error(
        run("restore", str(tmp_path / "missing.db"), database_url=target)
    )
    old = tmp_path / "old.db"
    migrate(f"sqlite:///{old}", "dd07bc22cb1c")  # the first migration only
    behind = one_line_error(run("restore", str(old), database_url=target))
    assert "dd07bc22cb1c" in behind and "migrate" in behind
    unmigrated = tmp_path / "empty.db"
    with sqlite3.connect(unmigrated) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    assert "migration" in one_line_error(run("restore", str(unmigrated), database_url=target))
    assert not (tmp_path / "target.db").exists()  # nothing was written by a refused restore

    pg = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    assert "pg_dump" in one_line_error(run("backup", str(tmp_path / "x.db"), database_url=pg))
    assert "pg_restore" in one_line_error(run("restore", str(old), database_url=pg))
    missing_db = f"sqlite:///{tmp_path / 'nothing-here.db'}"
    nothing = one_line_error(run("backup", str(tmp_path / "y.db"), database_url=missing_db))
    assert "no database" in nothing


def test_backup_into_a_folder_that_is_missing_is_refused_not_made_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`backup /var/backups/infracards/` before the folder exists wrote the copy as a file named
    `infracards` (the trailing slash was lost), and every later nightly run into that "folder"
    then failed on the existing file."""
    run = partial(run_main, capsys)
    db_url = f"sqlite:///{tmp_path / 'live.db'}"
    migrate(db_url)
    folder = tmp_path / "backups"
    refused = one_line_error(run("backup", f"{folder}/", database_url=db_url))
    assert refused == f"error: no folder {folder} for the backup"
    assert not folder.exists()
    folder.mkdir()
    assert run("backup", f"{folder}/", database_url=db_url).returncode == 0
    assert [p.suffix for p in folder.iterdir()] == [".db"]


@pytest.mark.parametrize(("setting", "pragma"), [(None, 2), ("normal", 1), ("FULL", 2)])
def test_sqlite_synchronous_setting_reaches_every_connection(
    tmp_path: Path, db_url: str, cards: dict, setting: str | None, pragma: int
) -> None:
    """FULL (2) unless NORMAL (1) is asked for: an acknowledged answer survives a power loss."""
    from conftest import make_settings

    from app.config import Settings
    from app.main import create_app

    # None: the service's own default (the tests' apps otherwise run with "normal").
    default = Settings.model_fields["sqlite_synchronous"].default
    chosen = {"sqlite_synchronous": default if setting is None else setting}
    app = create_app(make_settings(tmp_path, db_url, **chosen), cards=cards)
    try:
        with app.state.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == pragma
    finally:
        app.state.engine.dispose()
