"""Validating a card document as a job: compiled in the sandbox, then one sandbox task per
template on the sandbox's worker processes, with progress (templates done of the total).

A formula's evaluation is bounded by the parser; a whole card's validation is long work (the ZeRO
card takes seconds of CPU), so no single limit fits both:

- the document's size limits (:func:`app.domain.authoring.size_problem`) are checked before
  anything compiles: a card that is too large gets a problem naming the limit;
- compiling the document is one task (``COMPILE_CPU_S``), each template's validation another
  (``TEMPLATE_CPU_S``, the worker's first task also compiles the document it caches): a template
  that uses more is stopped with an error of its own, and the others are still validated;
- the whole job has a wall-clock bound (``Settings.validation_timeout_s``): templates not
  validated by then are reported as one error, so a draft is never published half-checked.

Jobs live in the process that started them (:func:`default_validations`); a finished job's
problems are kept for its document's digest, so the card page, the editor and publishing do not
validate an unchanged draft again (unless the job was interrupted: its time bound, a failing
worker).
"""

from __future__ import annotations

import atexit
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from app.authoring.sandbox import FormulaSandbox, default_sandbox, failure_text
from app.authoring.sandbox_worker import (
    COMPILE_CPU_S,
    DocumentCompiled,
    compile_document_task,
    validate_template_task,
)
from app.domain.authoring import CardProblem, draft_size
from app.domain.catalog import document_hash
from app.domain.messages import Message, plural_message
from app.domain.texts import Text

# CPU seconds one template's validation may use in the sandbox (the slowest ZeRO template takes
# under a second); compiling the document has its own bound, COMPILE_CPU_S.
TEMPLATE_CPU_S = 5
DEFAULT_TIMEOUT_S = 300.0
# Finished jobs kept (their problems answer the same document at once), and jobs running at once.
KEEP_FINISHED = 32
MAX_RUNNING = 4

State = Literal["running", "done"]


@dataclass
class ValidationJob:
    """One document's validation: its progress, then its problems."""

    id: str
    digest: str
    started: float = field(default_factory=time.monotonic)
    total: int | None = None  # templates to validate, once the document compiled
    done: int = 0
    problems: tuple[CardProblem, ...] | None = None  # when finished
    seconds: float | None = None  # wall-clock seconds, when finished
    # Stopped by its time bound or a failing worker, not by what the document says: its
    # problems are not kept for the document, which the next request validates again.
    interrupted: bool = False
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def state(self) -> State:
        return "done" if self._finished.is_set() else "running"

    def wait(self, timeout_s: float | None = None) -> bool:
        """Whether the job finished within ``timeout_s``."""
        return self._finished.wait(timeout_s)

    @property
    def errors(self) -> list[CardProblem]:
        return [p for p in self.problems or () if p.severity == "error"]


class TooManyValidations(Exception):
    """More documents are being validated at once than the process allows."""


class Validations:
    """The validation jobs of one process, each run on a thread that feeds the sandbox's
    workers (``workers`` templates at a time)."""

    def __init__(
        self,
        sandbox: Callable[[], FormulaSandbox] = default_sandbox,
        *,
        workers: int = 2,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        template_cpu_s: int = TEMPLATE_CPU_S,
    ) -> None:
        self._sandbox = sandbox
        self.workers = workers
        self.timeout_s = timeout_s
        self.template_cpu_s = template_cpu_s
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, ValidationJob] = OrderedDict()
        self._by_digest: dict[str, ValidationJob] = {}

    def start(self, document: dict[str, Any]) -> ValidationJob:
        """The job validating ``document``: a running or finished one for the same document, or
        a new one (:class:`TooManyValidations` when ``MAX_RUNNING`` run already)."""
        digest = document_hash(document)
        with self._lock:
            found = self._by_digest.get(digest)
            if found is not None:
                return found
            running = sum(1 for j in self._jobs.values() if j.state == "running")
            if running >= MAX_RUNNING:
                raise TooManyValidations
            job = ValidationJob(uuid.uuid4().hex, digest)
            self._jobs[job.id] = job
            self._by_digest[digest] = job
            self._forget_old()
        threading.Thread(
            target=self._run, args=(job, document), daemon=True, name="card-validation"
        ).start()
        return job

    def get(self, job_id: str) -> ValidationJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def get_finished(self, document: dict[str, Any]) -> tuple[CardProblem, ...] | None:
        """The problems of ``document`` when a finished job validated it."""
        with self._lock:
            job = self._by_digest.get(document_hash(document))
        return job.problems if job is not None and job.state == "done" else None

    def one_template(self, document: dict[str, Any], template_id: str) -> tuple[CardProblem, ...]:
        """The document's compilation problems and warnings, and ``template_id`` validated:
        two sandbox tasks, under the same limits as a job's."""
        sandbox = self._sandbox()
        digest = document_hash(document)
        kind, payload = sandbox.call(
            compile_document_task,
            digest,
            document,
            timeout_s=self.timeout_s,
            cpu_limit_s=COMPILE_CPU_S,
        )
        if kind != "ok":
            return (_error(template_id, failure_text(kind, payload, COMPILE_CPU_S), halts=True),)
        compiled: DocumentCompiled = payload
        if template_id not in compiled.to_validate:
            return compiled.problems + compiled.warnings
        kind, payload = sandbox.call(
            validate_template_task,
            digest,
            document,
            template_id,
            timeout_s=self.timeout_s,
            cpu_limit_s=self.template_cpu_s,
        )
        return (
            compiled.problems
            + self._template_result(template_id, kind, payload)
            + (compiled.warnings)
        )

    def _template_result(
        self, template_id: str, kind: str, payload: Any
    ) -> tuple[CardProblem, ...]:
        if kind == "ok":
            return tuple(payload)
        if kind == "cpu":
            text: Text = Message(
                "validating this template used more than %(seconds)s s of CPU time and was stopped",
                seconds=self.template_cpu_s,
            )
        else:
            text = failure_text(kind, payload, self.template_cpu_s)
        return (_error(template_id, text),)

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.state == "done"]
        for job in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[job.id]
            if self._by_digest.get(job.digest) is job:
                del self._by_digest[job.digest]

    def _run(self, job: ValidationJob, document: dict[str, Any]) -> None:
        try:
            job.problems = self._validate(job, document)
        except Exception as exc:  # pragma: no cover - reported as the job's one error
            job.problems = (
                _error(None, Message("the card could not be checked (%(error)s)", error=str(exc))),
            )
        job.seconds = round(time.monotonic() - job.started, 3)
        if job.interrupted:
            with self._lock:
                if self._by_digest.get(job.digest) is job:
                    del self._by_digest[job.digest]
        job._finished.set()

    def _validate(self, job: ValidationJob, document: dict[str, Any]) -> tuple[CardProblem, ...]:
        sandbox = self._sandbox()
        deadline = job.started + self.timeout_s
        kind, payload = sandbox.call(
            compile_document_task,
            job.digest,
            document,
            timeout_s=max(deadline - time.monotonic(), 0.001),
            cpu_limit_s=COMPILE_CPU_S,
        )
        if kind == "timeout":  # the job's time ran out while the document compiled
            job.interrupted = True
            return (replace(self._stopped(0, draft_size(document).templates), halts=True),)
        if kind != "ok":
            job.interrupted = kind == "error"
            return (_error(None, failure_text(kind, payload, COMPILE_CPU_S), halts=True),)
        compiled: DocumentCompiled = payload
        if not compiled.compiled:
            job.total = 0
            return compiled.problems
        templates = compiled.to_validate
        # Every template of the card counts: one that does not compile was checked too (its
        # error is among the compilation problems), so it is done before the others start.
        job.total = len(templates) + compiled.not_compiled
        job.done = compiled.not_compiled
        found: list[tuple[CardProblem, ...] | None] = [None] * len(templates)
        count = threading.Lock()

        def validate(index: int) -> None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return  # left unvalidated: reported below
            template_id = templates[index]
            kind, payload = sandbox.call(
                validate_template_task,
                job.digest,
                document,
                template_id,
                timeout_s=remaining,
                cpu_limit_s=self.template_cpu_s,
            )
            if kind == "timeout":
                return  # the job's time ran out: reported below
            if kind == "error":
                job.interrupted = True
            found[index] = self._template_result(template_id, kind, payload)
            with count:
                job.done += 1

        with ThreadPoolExecutor(self.workers, thread_name_prefix="card-validation") as pool:
            list(pool.map(validate, range(len(templates))))
        problems = list(compiled.problems)
        for result in found:
            problems.extend(result or ())
        if job.done < job.total:
            job.interrupted = True
            problems.append(self._stopped(job.done, job.total))
        problems.extend(compiled.warnings)
        return tuple(problems)

    def _stopped(self, done: int, total: int) -> CardProblem:
        return _error(
            None,
            plural_message(
                "validation stopped after %(seconds)s s with %(done)s of %(num)s "
                "template validated: the card is too slow to validate",
                "validation stopped after %(seconds)s s with %(done)s of %(num)s "
                "templates validated: the card is too slow to validate",
                total,
                seconds=f"{self.timeout_s:g}",
                done=done,
                num=total,
            ),
        )


def _error(template_id: str | None, text: Text, *, halts: bool = False) -> CardProblem:
    return CardProblem("error", template_id, None, text, None, halts=halts)


_default: Validations | None = None
_default_lock = threading.Lock()


def default_validations() -> Validations:
    """The process's validation jobs, on the process's sandbox (``Settings.sandbox_workers``
    templates at a time, ``Settings.validation_timeout_s`` for a whole card)."""
    global _default
    with _default_lock:
        if _default is None:
            from app.config import get_settings

            settings = get_settings()
            _default = Validations(
                workers=settings.sandbox_workers, timeout_s=settings.validation_timeout_s
            )
            atexit.register(_forget)
        return _default


def _forget() -> None:
    global _default
    _default = None
