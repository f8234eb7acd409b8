"""Formulas typed by instructors, parsed and evaluated in worker processes under a CPU limit.

The parser (:mod:`app.domain.formulas`) bounds the size of every value it computes, so no formula
known today takes more than milliseconds. This module is the second line: whatever an authored
formula or card costs, a request thread waits at most ``timeout_s`` for it.

- A small pool of worker processes (``multiprocessing``, the ``forkserver`` start method on Linux
  with the formula engine preloaded, so a replacement starts in milliseconds; ``spawn``
  elsewhere). The web process never forks itself (it has threads).
- In each worker, a CPU limit (``RLIMIT_CPU``, see :mod:`app.authoring.sandbox_worker`): a task
  that uses more than ``cpu_limit_s`` ends with a formula error, and the worker is replaced.
- In the caller, a wall-clock timeout: a worker that has not answered after ``timeout_s`` (stuck
  in one long C-level operation, where no signal handler runs) is killed and replaced, and the
  call returns a formula error. Waiting for a free worker counts against the same timeout.

Use :func:`check_formula` (one formula, optionally evaluated for given values) and
:func:`check_card_document` (every problem of a card document, as
:func:`app.domain.authoring.check_document` lists them) from request handlers; both use one
pool per process, started on first use (:func:`default_sandbox`), and return their failures
instead of raising them. :class:`FormulaSandbox` is the pool itself (tests make their own).
"""

from __future__ import annotations

import atexit
import multiprocessing
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.authoring.sandbox_worker import (
    CardCheck,
    FormulaCheck,
    card_formulas_task,
    check_card_task,
    check_formula_task,
    draft_formula_task,
    serve,
)
from app.domain.formulas import FormulaError
from app.domain.messages import Message
from app.domain.texts import Text

DEFAULT_WORKERS = 2
# CPU seconds one task may use in a worker (RLIMIT_CPU counts whole seconds).
DEFAULT_CPU_LIMIT_S = 2
# Wall-clock seconds a caller waits for one formula, and for a whole card document.
DEFAULT_FORMULA_TIMEOUT_S = 2.0
DEFAULT_CARD_TIMEOUT_S = 20.0
# CPU seconds a worker may use in its whole life (the hard RLIMIT_CPU).
DEFAULT_LIFETIME_CPU_S = 600
# How long a new worker may take to start (spawn imports sympy: about a second).
STARTUP_TIMEOUT_S = 60.0


class _Worker:
    def __init__(self, context: Any, cpu_limit_s: int, lifetime_cpu_s: int) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=serve,
            args=(child, cpu_limit_s, lifetime_cpu_s),
            daemon=True,
            name="formula-sandbox",
        )
        self.process.start()
        child.close()
        self.ready = False

    def wait_ready(self) -> bool:
        if self.ready:
            return True
        try:
            if self.conn.poll(STARTUP_TIMEOUT_S):
                self.ready = self.conn.recv()[0] == "ready"
        except (EOFError, OSError):
            self.ready = False
        return self.ready

    def stop(self) -> None:
        """Kill the process and reap it (SIGKILL: it may be stuck where no handler runs)."""
        try:
            self.conn.close()
        except OSError:
            pass
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)


class FormulaSandbox:
    """A pool of worker processes that run formula tasks under a CPU limit and a timeout.

    Thread-safe: each call takes a free worker (waiting, within its timeout, when all are busy)
    and gives it back, or a fresh one when it had to be killed.
    """

    def __init__(
        self,
        workers: int = DEFAULT_WORKERS,
        *,
        cpu_limit_s: int = DEFAULT_CPU_LIMIT_S,
        lifetime_cpu_s: int = DEFAULT_LIFETIME_CPU_S,
    ) -> None:
        if workers < 1:
            raise ValueError("a sandbox needs at least one worker")
        if cpu_limit_s < 1 or lifetime_cpu_s <= cpu_limit_s + 1:
            raise ValueError("cpu_limit_s >= 1 and lifetime_cpu_s > cpu_limit_s + 1 seconds")
        self.cpu_limit_s = int(cpu_limit_s)
        self.lifetime_cpu_s = int(lifetime_cpu_s)
        self._context = _context()
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._workers: set[_Worker] = set()
        self._closed = False
        self.replaced = 0  # workers killed or retired and replaced, for tests and monitoring
        for _ in range(workers):
            self._idle.put(self._start())

    def _start(self) -> _Worker:
        worker = _Worker(self._context, self.cpu_limit_s, self.lifetime_cpu_s)
        with self._lock:
            self._workers.add(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        worker.stop()
        with self._lock:
            self._workers.discard(worker)
            self.replaced += 1
        return self._start()

    def call(
        self,
        function: Callable[..., Any],
        *args: Any,
        timeout_s: float,
        cpu_limit_s: int | None = None,
    ) -> tuple[str, Any]:
        """Run ``function(*args)`` (a module-level function: it is pickled by name) in a worker,
        under ``cpu_limit_s`` CPU seconds (the pool's limit when None).

        The answer is ``("ok", result)``, ``("formula-error", (reason, column))``, ``("error",
        message)``, ``("cpu", seconds)`` when the CPU limit stopped it after that much CPU time
        (``cpu_limit_s`` to ``cpu_limit_s + 1``, the kernel counting whole seconds), or ``("timeout",
        seconds)`` when the worker was killed after ``timeout_s`` of wall-clock time.
        """
        if self._closed:
            raise RuntimeError("the formula sandbox is closed")
        deadline = time.monotonic() + timeout_s
        try:
            worker = self._idle.get(timeout=max(timeout_s, 0.001))
        except queue.Empty:
            return ("timeout", timeout_s)
        try:
            if not worker.process.is_alive():
                worker = self._replace(worker)
            if not worker.wait_ready():
                worker = self._replace(worker)
                return ("error", "a formula worker did not start")
            try:
                worker.conn.send((function, args, cpu_limit_s))
                remaining = max(deadline - time.monotonic(), 0.0)
                if not worker.conn.poll(remaining):
                    worker = self._replace(worker)
                    return ("timeout", timeout_s)
                kind, payload, retiring = worker.conn.recv()
            except (EOFError, OSError):  # the worker died during the task
                worker.process.join(timeout=1)
                code = worker.process.exitcode
                worker = self._replace(worker)
                if code in (-signal.SIGKILL, -signal.SIGXCPU):  # the kernel's hard CPU limit
                    return ("cpu", cpu_limit_s or self.cpu_limit_s)
                return ("error", f"the formula worker stopped (exit code {code})")
            if retiring:
                worker = self._replace(worker)
            return (kind, payload)
        finally:
            if self._closed:
                worker.stop()
            else:
                self._idle.put(worker)

    def check_formula(
        self,
        text: str,
        names: Sequence[str] | frozenset[str],
        definitions: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        values: Mapping[str, object] | None = None,
        *,
        timeout_s: float = DEFAULT_FORMULA_TIMEOUT_S,
    ) -> FormulaCheck | FormulaError:
        """Parse ``text`` with the parameters ``names`` and the card formulas ``definitions``
        (id → formula text, in the card's order; each may use the earlier ones) and, with
        ``values`` (parameter → an int, a decimal string ...), evaluate it.

        Returns a :class:`FormulaCheck`, or the :class:`FormulaError` (not raised) with its
        reason and column, including when the work ran out of time.
        """
        pairs = (
            tuple(definitions.items())
            if isinstance(definitions, Mapping)
            else tuple((str(name), str(expr)) for name, expr in definitions)
        )
        given = None if values is None else tuple(values.items())
        kind, payload = self.call(
            check_formula_task, text, frozenset(names), pairs, given, timeout_s=timeout_s
        )
        if kind == "ok":
            return payload  # type: ignore[no-any-return]
        shown = text if isinstance(text, str) else None
        if kind == "formula-error":
            reason, column = payload
            return FormulaError(reason, text=shown, column=column)
        return FormulaError(_failure_reason(kind, payload, self.cpu_limit_s), text=shown)

    def check_card_document(
        self, document: object, *, timeout_s: float = DEFAULT_CARD_TIMEOUT_S
    ) -> CardCheck:
        """Every problem of a card document, as ``check_document`` lists them; a check that
        fails or runs out of time is one error problem."""
        kind, payload = self.call(check_card_task, document, timeout_s=timeout_s)
        if kind == "ok":
            return payload  # type: ignore[no-any-return]
        from app.domain.authoring import CardProblem

        if kind == "formula-error":
            message = payload[0]
        else:
            message = _failure_reason(kind, payload, self.cpu_limit_s)
        return CardCheck((CardProblem("error", None, None, message, None),), publishable=False)

    def close(self) -> None:
        """Stop every worker (idle ones now, busy ones when their call returns)."""
        self._closed = True
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            try:
                worker.conn.send(None)
            except OSError:
                pass
            worker.stop()

    def __enter__(self) -> FormulaSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def failure_text(kind: str, payload: Any, cpu_limit_s: int) -> Text:
    """What a failed :meth:`FormulaSandbox.call` answer (kind, payload) says to the author."""
    if kind == "formula-error":
        reason: Text = payload[0]
        return reason
    return _failure_reason(kind, payload, cpu_limit_s)


def _failure_reason(kind: str, payload: Any, cpu_limit_s: int) -> Text:
    if kind == "timeout":
        return Message(
            "the formula took more than %(seconds)s s to check and was stopped",
            seconds=f"{payload:g}",
        )
    if kind == "cpu":
        return Message(
            "the formula used more than %(seconds)s s of CPU time and was stopped",
            seconds=cpu_limit_s,
        )
    return Message("the formula could not be checked (%(error)s)", error=str(payload))


def _context() -> Any:
    """forkserver (a clean server process forks the workers, the formula engine preloaded) where
    the platform has it, else spawn; never fork, since the caller has threads."""
    if sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["app.authoring.sandbox", "app.domain.authoring"])
        return context
    return multiprocessing.get_context("spawn")


# --- one pool per process ---------------------------------------------------------------------

_default: FormulaSandbox | None = None
_default_lock = threading.Lock()


def default_sandbox() -> FormulaSandbox:
    """The process's pool, started on first use and stopped at exit."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            from app.config import get_settings

            _default = FormulaSandbox(get_settings().sandbox_workers)
            atexit.register(_default.close)
        return _default


def check_formula(
    text: str,
    names: Sequence[str] | frozenset[str],
    definitions: Mapping[str, str] | Sequence[tuple[str, str]] = (),
    values: Mapping[str, object] | None = None,
    *,
    timeout_s: float = DEFAULT_FORMULA_TIMEOUT_S,
) -> FormulaCheck | FormulaError:
    """:meth:`FormulaSandbox.check_formula` on the process's pool."""
    return default_sandbox().check_formula(text, names, definitions, values, timeout_s=timeout_s)


def check_card_document(
    document: object, *, timeout_s: float = DEFAULT_CARD_TIMEOUT_S
) -> CardCheck:
    """:meth:`FormulaSandbox.check_card_document` on the process's pool."""
    return default_sandbox().check_card_document(document, timeout_s=timeout_s)


def check_draft_formula(
    text: str,
    names: frozenset[str],
    document: Mapping[str, object],
    *,
    timeout_s: float = DEFAULT_FORMULA_TIMEOUT_S,
) -> FormulaCheck | FormulaError:
    """Parse ``text`` with the parameters ``names`` and the card formulas of a draft
    ``document``, all compiled in the process's pool (a draft whose card formulas do not compile
    checks the formula without them: the card page reports them)."""
    params = document.get("params")
    formulas = document.get("formulas")
    kind, payload = default_sandbox().call(
        draft_formula_task,
        text,
        names,
        tuple(str(p) for p in params) if isinstance(params, list) else (),
        tuple(formulas) if isinstance(formulas, list) else (),
        timeout_s=timeout_s,
    )
    if kind == "ok":
        return payload  # type: ignore[no-any-return]
    shown = text if isinstance(text, str) else None
    if kind == "formula-error":
        reason, column = payload
        return FormulaError(reason, text=shown, column=column)
    return FormulaError(_failure_reason(kind, payload, default_sandbox().cpu_limit_s), text=shown)


def check_card_formulas(
    params: Sequence[str],
    formulas: Sequence[Mapping[str, object]],
    *,
    timeout_s: float = DEFAULT_CARD_TIMEOUT_S,
) -> Any:
    """The first problem (a :class:`app.domain.authoring.CardProblem`, at its field and column)
    of a card's parameters and named formulas, compiled in the process's pool (a card's worth
    of formulas: the card's timeout); None when they compile."""
    kind, payload = default_sandbox().call(
        card_formulas_task,
        tuple(str(p) for p in params),
        tuple(formulas),
        timeout_s=timeout_s,
    )
    if kind == "ok":
        return payload
    from app.domain.authoring import CardProblem

    reason = failure_text(kind, payload, default_sandbox().cpu_limit_s)
    return CardProblem("error", None, None, reason, None)
