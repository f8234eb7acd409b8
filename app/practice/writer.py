"""Group commit: answers that arrive together are stored in one write transaction by one thread.

The writer takes every group of answers queued while the previous batch was written (up to
``max_batch`` answers; a group submitted together stays together), stores them in one
transaction (``BEGIN IMMEDIATE`` on SQLite) by its ``store`` function (app.practice.answers.
store_batch: what an answer means), commits, and only then wakes whoever waits for them (one
wake-up per event loop; a thread of the threadpool waits on its event). A failed commit gives
every answer of the batch its error: nothing is acknowledged that is not stored. A batch that
cannot be stored whole (a lost insert race, a deadlock on PostgreSQL) is rolled back and tried
again, then written answer by answer, each in its own savepoint, so one answer's failure is that
answer's only. Database trouble that waiting again cannot cure (SQLite locked by another process
for the whole busy timeout, a full disk, a server that does not answer: ``app.db.NOT_TRIED_AGAIN``)
fails the batch at once.

Nobody waits longer than ``wait_s`` (the database's own bound, plus a second): past it the waiter
gets :class:`~app.db.WriteTimedOut` (a busy 503 with Retry-After), whatever the batch does (a
frozen file system can hold a commit for minutes). Its answers are then left out of any batch
not yet begun; one already being written may still be stored, and sending the answer again
(the same ``client_answer_id``) replays it: never twice.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.db import failure_kind, first_line, write_transaction
from app.db_errors import NOT_TRIED_AGAIN, WriteTimedOut
from app.problems import Conflict

WRITE_TRIES = 3  # a batch written whole, before it is written answer by answer
log = logging.getLogger(__name__)


class Written(Protocol):
    """An answer to write: ``store`` sets its outcome, or its own error."""

    outcome: Any
    error: BaseException | None


T = TypeVar("T", bound=Written)


@dataclass
class _Group(Generic[T]):
    """Answers submitted together, and who waits for them: an event loop's future, or a thread."""

    items: Sequence[T]
    loop: asyncio.AbstractEventLoop | None = None
    future: asyncio.Future[None] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    # "queued", then "writing" (taken into a batch) or "abandoned" (its waiter gave up first)
    state: str = "queued"


class AnswerWriter(Generic[T]):
    """Stores answers by group commit on one thread: one write transaction per batch, in which
    ``store(db, items)`` stores them in ``order`` (the same on every process, so that two
    processes' batches take their row locks alike and do not deadlock)."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        store: Callable[[Session, Sequence[T]], None],
        order: Callable[[T], Any],
        *,
        max_batch: int = 256,
        wait_s: float = 30.0,
    ) -> None:
        self._sessions = sessions
        self._store = store
        self._order = order
        self._max_batch = max_batch
        self._wait_s = wait_s
        self._states = threading.Lock()  # a group's state moves under it
        self._turn = WriterTurn(sessions.kw["bind"])
        self._queue: queue.SimpleQueue[_Group[T]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="answer-writer", daemon=True)
        self._thread.start()

    async def submit(self, items: Sequence[T]) -> None:
        """Store ``items`` (each gets its outcome or error), awaited on the event loop;
        :class:`~app.db.WriteTimedOut` after ``wait_s``."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        group = _Group(items, loop, future)
        self._queue.put(group)
        try:
            await asyncio.wait_for(asyncio.shield(future), self._wait_s)
        except TimeoutError:
            self._give_up(group)

    def wait(self, items: Sequence[T]) -> None:
        """Store ``items`` (each gets its outcome or error), waited for by this thread;
        :class:`~app.db.WriteTimedOut` after ``wait_s``."""
        if items:
            group = _Group(items)
            self._queue.put(group)
            if not group.done.wait(self._wait_s):
                self._give_up(group)

    def _give_up(self, group: _Group[T]) -> None:
        with self._states:
            if group.state == "queued":
                group.state = "abandoned"
        log.warning("%d answers were not stored within %.1f s", len(group.items), self._wait_s)
        raise WriteTimedOut(f"the answers were not stored within {self._wait_s:.1f} s")

    def _take(self, group: _Group[T]) -> bool:
        """Whether ``group`` is still waited for (it is being written from now on)."""
        with self._states:
            if group.state == "abandoned":
                return False
            group.state = "writing"
            return True

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            groups = [first] if self._take(first) else []
            count = len(first.items) if groups else 0
            while count < self._max_batch:
                try:
                    group = self._queue.get_nowait()
                except queue.Empty:
                    break
                if self._take(group):
                    groups.append(group)
                    count += len(group.items)
            if not groups:
                continue
            self.write([item for group in groups for item in group.items])
            by_loop: dict[asyncio.AbstractEventLoop, list[_Group[T]]] = {}
            for group in groups:
                if group.loop is None:
                    group.done.set()
                else:
                    by_loop.setdefault(group.loop, []).append(group)
            for loop, waiting in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_wake, waiting)
                except RuntimeError:  # its event loop is closed: nobody waits for it
                    pass

    def write(self, items: Sequence[T]) -> None:
        """One batch: whole, tried again when that fails (the next try reads what another
        process committed meanwhile), then answer by answer."""
        ordered = sorted(items, key=self._order)
        try:
            with self._turn():  # several processes on one SQLite file: one writer at a time
                for attempt in range(WRITE_TRIES):
                    try:
                        with self._sessions() as db, write_transaction(db):
                            self._store(db, ordered)
                        return
                    except Exception as exc:  # noqa: BLE001 - rolled back: nothing is stored
                        if failure_kind(exc) in NOT_TRIED_AGAIN:
                            raise
                        log.info("%d answers are tried again (%d): %s", len(items), attempt, exc)
                self._write_each(ordered)
        except BaseException as exc:  # noqa: BLE001 - the commit failed: acknowledge none
            log.warning("a batch of %d answers was not stored: %s", len(items), exc)
            for item in items:
                item.outcome, item.error = None, exc

    def _write_each(self, items: Sequence[T]) -> None:
        with self._sessions() as db, write_transaction(db):
            for item in items:
                for last in (False, True):  # once more after a lost insert race: it replays
                    try:
                        with db.begin_nested():
                            self._store(db, [item])
                        break
                    except IntegrityError:
                        item.outcome, item.error = None, None
                        if last:
                            item.error = Conflict(
                                "the answer could not be stored: send it again",
                                code="answer_conflict",
                            )
                    except Exception as exc:  # noqa: BLE001 - this answer only
                        item.outcome, item.error = None, exc
                        break


class WriterTurn:
    """Whose turn it is to write, among the processes sharing one SQLite file: an exclusive
    ``flock`` on ``<database>.writers``, held around a batch's write transaction. Waiting on
    SQLite's own lock, a writer sleeps in 1, 2, 5, 10 … ms steps (its busy handler) and misses
    the moments the lock is free; the kernel wakes a flock waiter as soon as the holder lets go.
    A no-op on PostgreSQL, for in-memory SQLite and when the lock file cannot be opened (SQLite's
    lock still serialises the writers then)."""

    def __init__(self, engine: Engine) -> None:
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        self._path = f"{database}.writers" if database and database != ":memory:" else None
        self._fd: int | None = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self._path is not None and self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                log.warning("writers take turns by SQLite's lock only: %s", first_line(exc))
                self._path = None
        if self._fd is None:
            yield
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def _wake(groups: Sequence[_Group[Any]]) -> None:
    for group in groups:
        if group.future is not None and not group.future.done():  # not cancelled
            group.future.set_result(None)
