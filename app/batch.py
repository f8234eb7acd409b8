"""SQL for batches (the answer writer's): many keys read at once, reads sent together, writes
sent together, ids for new rows from the database. Every statement is a SQLAlchemy Core
construct, compiled by SQLAlchemy for the connection's dialect.

On PostgreSQL (psycopg) a batch's reads go to the server together in psycopg's pipeline mode
(one round trip for all of them instead of one each), and so do its writes; keyed reads are one
statement whatever the number of keys (``unnest`` of one array per column), so psycopg prepares
it once. SQLite is in the process: its statements run one after another, each keyed read an
``OR`` of index seeks.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Table,
    and_,
    bindparam,
    func,
    insert,
    or_,
    select,
    tuple_,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

from app.db import engine_health, failure_kind, first_line


@dataclass(frozen=True)
class Read:
    """A select and its parameters, for :func:`read_together`."""

    statement: Select[Any]
    params: Mapping[str, Any]


class ByKeys:
    """A select of the rows named by many keys at once (the columns of an index). ``build``
    makes the select from its condition.

    PostgreSQL gets ``(a, b) IN (SELECT * FROM unnest(:k_0, :k_1))``, one array per column: one
    statement whatever the count, planned once. SQLite gets ``(a = :k0_0 AND b = :k0_1) OR
    (...)``, built once per power-of-two count of key slots (spare slots repeat the first key),
    each term an index seek (SQLite's row-value ``IN (VALUES ...)`` scans the whole index)."""

    def __init__(
        self,
        columns: Iterable[ColumnElement[Any]],
        build: Callable[[ColumnElement[bool]], Select[Any]],
    ) -> None:
        self._columns = tuple(columns)
        self._build = build
        self._statements: dict[tuple[str, int], Select[Any]] = {}

    def read(self, dialect: Dialect, keys: Iterable[tuple[Any, ...]]) -> Read | None:
        """The read of ``keys`` (``None`` for no keys)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return None
        if dialect.name == "postgresql":
            statement = self._statements.get(("postgresql", 0))
            if statement is None:
                arrays = [
                    bindparam(f"k_{j}", type_=postgresql.ARRAY(column.type))
                    for j, column in enumerate(self._columns)
                ]
                names = [f"k{j}" for j in range(len(arrays))]
                keys_table = func.unnest(*arrays).table_valued(*names).render_derived()
                where: ColumnElement[bool] = tuple_(*self._columns).in_(select(*keys_table.c))
                statement = self._statements["postgresql", 0] = self._build(where)
            columns = zip(*wanted, strict=True)
            return Read(statement, {f"k_{j}": list(values) for j, values in enumerate(columns)})
        slots = 1 << (len(wanted) - 1).bit_length()
        statement = self._statements.get(("", slots))
        if statement is None:
            where = or_(
                *(
                    and_(*(c == bindparam(f"k{i}_{j}") for j, c in enumerate(self._columns)))
                    for i in range(slots)
                )
            )
            statement = self._statements["", slots] = self._build(where)
        wanted += [wanted[0]] * (slots - len(wanted))
        params = {f"k{i}_{j}": value for i, key in enumerate(wanted) for j, value in enumerate(key)}
        return Read(statement, params)

    def rows(self, connection: Connection, keys: Iterable[tuple[Any, ...]]) -> Sequence[Any]:
        """The rows of ``keys`` (none for no keys)."""
        (rows,) = read_together(connection, [self.read(connection.dialect, keys)])
        return rows


class NewIds:
    """Ids for new rows of ``table`` from the database: on PostgreSQL drawn from the id column's
    sequence with the batch's reads (:meth:`read`, at most as many as may be inserted; the rest
    are skipped, as any sequence skips), so that the insert itself reads nothing back and goes
    with the batch's other writes; on SQLite given by the insert (``RETURNING``, matched to the
    rows by the unique column ``key``: one multi-row insert, in no promised order)."""

    def __init__(self, table: Table, key: str) -> None:
        self._table = table
        self._key = key
        sequence = func.pg_get_serial_sequence(table.name, "id")
        self._draw = select(func.nextval(sequence)).select_from(
            func.generate_series(1, bindparam("count"))
        )
        self._insert = insert(table).inline()  # the ids are given: nothing to read back
        self._returning = insert(table).returning(table.c.id, table.c[key])

    def read(self, dialect: Dialect, count: int) -> Read | None:
        """The ids to draw for up to ``count`` rows (``None`` where the insert gives them)."""
        if dialect.name != "postgresql" or count == 0:
            return None
        return Read(self._draw, {"count": count})

    def insert(
        self, connection: Connection, rows: Sequence[Mapping[str, Any]], drawn: Sequence[Any]
    ) -> list[int]:
        """Insert ``rows`` (all columns but the id); their ids in order. ``drawn``: the rows of
        :meth:`read`."""
        if not rows:
            return []
        if connection.dialect.name != "postgresql":
            given = {key: id_ for id_, key in connection.execute(self._returning, list(rows))}
            return [given[row[self._key]] for row in rows]
        ids: list[int] = sorted(row[0] for row in drawn)[: len(rows)]
        assert len(ids) == len(rows), "fewer ids drawn than rows to insert"
        connection.execute(
            self._insert, [{"id": id_, **row} for id_, row in zip(ids, rows, strict=True)]
        )
        return ids


@dataclass(frozen=True)
class _Compiled:
    """A select as the driver runs it: SQLAlchemy's SQL for the dialect, its bind processors,
    its result columns' processors and the named tuple of its rows."""

    sql: str
    compiled: Any
    binds: Mapping[str, Callable[[Any], Any] | None]
    results: Sequence[Callable[[Any], Any] | None]
    row: Any

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        params = self.compiled.construct_params(values)
        for name, process in self.binds.items():
            if process is not None and name in params:
                params[name] = process(params[name])
        return dict(params)

    def rows(self, fetched: Sequence[Sequence[Any]]) -> list[Any]:
        row_type, results = self.row, self.results
        if not any(results):
            return [row_type(*row) for row in fetched]
        return [
            row_type(
                *(
                    v if process is None else process(v)
                    for v, process in zip(row, results, strict=True)
                )
            )
            for row in fetched
        ]


_compiled_selects: dict[tuple[int, str], tuple[Select[Any], _Compiled]] = {}


def _compile(statement: Select[Any], dialect: Dialect) -> _Compiled:
    """``statement`` compiled once for ``dialect`` (the statements are module constants)."""
    key = (id(statement), dialect.name)
    cached = _compiled_selects.get(key)
    if cached is not None and cached[0] is statement:
        return cached[1]
    compiled = statement.compile(dialect=dialect)
    columns = list(statement.selected_columns)
    prepared = _Compiled(
        sql=compiled.string,
        compiled=compiled,
        binds={name: bind.type.bind_processor(dialect) for name, bind in compiled.binds.items()},
        results=[column.type.result_processor(dialect, None) for column in columns],
        row=namedtuple("Row", list(statement.selected_columns.keys()), rename=True),
    )
    _compiled_selects[key] = (statement, prepared)
    return prepared


def read_together(connection: Connection, reads: Sequence[Read | None]) -> list[list[Any]]:
    """The rows of each of ``reads`` (none for a ``None``), which must not depend on each
    other. On PostgreSQL (psycopg) all are sent before any answer is awaited (its pipeline mode:
    one round trip), errors raised as SQLAlchemy raises them (:func:`driver_errors`); elsewhere
    they run one after another through the connection."""
    sent = [read for read in reads if read is not None]
    if connection.dialect.driver != "psycopg" or len(sent) < 2:
        return [
            [] if read is None else list(connection.execute(read.statement, read.params))
            for read in reads
        ]
    dialect = connection.dialect
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None  # a connection in use has its driver's
    results = []
    with driver_errors(connection), driver_connection.pipeline() as pipeline:
        cursors = []
        for read in sent:
            prepared = _compile(read.statement, dialect)
            cursor = driver_connection.cursor()
            cursor.execute(prepared.sql, prepared.params(read.params))
            cursors.append((prepared, cursor))
        pipeline.sync()
        for prepared, cursor in cursors:
            with cursor:
                results.append(prepared.rows(cursor.fetchall()))
    found = iter(results)
    return [[] if read is None else next(found) for read in reads]


@contextmanager
def pipelined(connection: Connection) -> Iterator[None]:
    """The statements the block runs on ``connection`` sent together (psycopg's pipeline mode:
    one round trip to the server for all of them), for a block that writes and reads nothing
    back; elsewhere (SQLite) the block just runs. A statement's failure surfaces at the end of
    the block, raised as :func:`driver_errors` raises it."""
    if connection.dialect.driver != "psycopg":
        yield
        return
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None
    with driver_errors(connection), driver_connection.pipeline():
        yield


@contextmanager
def driver_errors(connection: Connection) -> Iterator[None]:
    """The driver's own errors, raised in the block by calls past SQLAlchemy's execution,
    raised as SQLAlchemy raises them (``IntegrityError``, ``OperationalError`` …, the driver's
    error as ``orig``) and recorded in the engine's health like any other database failure; a
    connection lost meanwhile is invalidated, so the pool does not hand it out again."""
    dbapi = connection.dialect.loaded_dbapi
    try:
        yield
    except dbapi.Error as exc:
        driver_connection = connection.connection.driver_connection
        lost = connection.dialect.is_disconnect(exc, driver_connection, None)
        wrapped = sa_exc.DBAPIError.instance(
            None, None, exc, dbapi.Error, connection_invalidated=lost, dialect=connection.dialect
        )
        kind = failure_kind(wrapped)
        if kind is not None:
            engine_health(connection.engine).record(kind, first_line(exc))
        if lost:
            connection.invalidate(exc)
        raise wrapped from exc
