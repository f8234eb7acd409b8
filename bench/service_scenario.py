"""The scenario of bench/service.py and its exactly-once checks.

One scenario is a database (a fresh SQLite file or PostgreSQL database) and a number of uvicorn
workers. It runs the baseline app (bare async JSON, one-row insert into the same kind of
database) and the app side by side, each endpoint as one :class:`Phase` (a short warm-up in the
first round, then its share of the measured requests, both sent by wrk), in interleaved rounds
whose ratios are taken per round (the median is reported), and checks afterwards that every POST
was answered 200 and that the database holds exactly one row per distinct ``client_answer_id``
sent.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import re
import secrets
import statistics
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
from service_baseline import BASELINE_DB_ENV, TABLE
from service_load import REQUEST_TIMEOUT_S, Load, Spec, run_wrk
from service_servers import BenchError, Database, Server, log_tail, migrate, process_cpu_s, serve

BENCH_DIR = Path(__file__).resolve().parent
CARD_ID = "zero-memory-offload"
MAX_SEED = 2**31 - 1  # app.domain.identity.MAX_SEED
QUESTION_BATCH = 50  # GET .../questions?count= when fetching the answer phase's questions
LEARNERS = 32  # default learners (and browsers), each answering its own questions in turn


def progress(message: str) -> None:
    import sys

    print(message, file=sys.stderr, flush=True)


@dataclass
class Phase:
    key: str
    label: str
    make_specs: Callable[[int], list[Spec]]
    headers: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None  # key of the phase whose req/s is the denominator
    after_warm_up: Callable[[], None] | None = None  # run between warm-up and measurement
    # How many requests to warm up with, given --requests (None: warmup_count).
    warm_up: Callable[[int], int] | None = None
    expect_status: int = 200  # what every response must be (a form POST: 303 See Other)


@dataclass
class PhaseResult:
    key: str
    label: str
    requests: int
    req_per_s: float
    p50_ms: float
    p99_ms: float
    non_200: int
    errors: int
    server_cpu_pct: float | None
    client_cpu_pct: float | None
    baseline: str | None
    ratio: float | None = None
    # Warm-up and measured requests together, for the checks.
    sent_all: list[Spec] = field(default_factory=list, repr=False)
    unanswered_all: int = 0
    non_200_all: int = 0
    problems_all: Counter[str] = field(default_factory=Counter)


@dataclass
class Options:
    requests: int
    concurrency: int
    max_seconds: float
    wrk: str
    workdir: Path
    startup_timeout: float
    seed: int
    rounds: int = 3
    # uvicorn's HTTP implementation and event loop, the same for the baseline app and the app
    http: str = "httptools"
    loop: str = "asyncio"
    # The learners answering (and browsers loading pages) in turn: with the default 32 each
    # comes back within milliseconds, so the app's 5-second caches of tokens and browser
    # sessions nearly always hold it; more learners come back less often, as people do.
    learners: int = LEARNERS

    @property
    def server_args(self) -> list[str]:
        return ["--http", self.http, "--loop", self.loop]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def warmup_count(requests: int) -> int:
    return min(200, max(5, requests // 10))


# The question GET's caches fill over its first thousands of requests in each worker (above all
# the MathML of stems and choices, by text): in process its first 1,000 questions took 111 µs
# each, the next 1,000 92 µs, then 88, 83 ... 81 µs from the 5,000th on. The answers' tokens are
# fetched beforehand over one connection, which warms one worker only. So the question GET warms
# up with enough requests for every worker (wrk's connections are spread over them) to be
# measured as a server that has been up for a while serves (fewer in a short run).
QUESTION_WARM_UP = 6000


def question_warmup_count(requests: int) -> int:
    return min(QUESTION_WARM_UP, max(warmup_count(requests), 2 * requests))


def run_phase(
    phase: Phase, server: Server, opts: Options, requests: int, warm_up: bool
) -> PhaseResult:
    """Warm up (when ``warm_up``), then measure ``requests`` requests; both with wrk."""
    progress(f"    {phase.label} ...")
    warm = (
        run_wrk(
            opts.wrk,
            server.url,
            phase.headers,
            phase.make_specs((phase.warm_up or warmup_count)(opts.requests)),
            opts.concurrency,
            60.0,  # generous: a warm-up cut short would count its in-flight requests unanswered
            opts.workdir,
            phase.expect_status,
        )
        if warm_up
        else Load([], 0, 0, 0, 0.0, math.nan, math.nan, None)
    )
    if warm_up and phase.after_warm_up is not None:
        phase.after_warm_up()
    specs = phase.make_specs(requests)
    cpu_before = process_cpu_s(server.pid)
    load = run_wrk(
        opts.wrk,
        server.url,
        phase.headers,
        specs,
        opts.concurrency,
        opts.max_seconds,
        opts.workdir,
        phase.expect_status,
    )
    cpu_after = process_cpu_s(server.pid)
    window = load.seconds  # CPU over the time the load ran (the server idles around it)
    server_cpu = (
        100 * (cpu_after - cpu_before) / window
        if cpu_before is not None and cpu_after is not None and window > 0
        else None
    )
    client_cpu = (
        100 * load.client_cpu_s / window if load.client_cpu_s is not None and window > 0 else None
    )
    return PhaseResult(
        key=phase.key,
        label=phase.label,
        requests=load.responses,
        req_per_s=load.responses / load.seconds if load.seconds > 0 else 0.0,
        p50_ms=load.p50_ms,
        p99_ms=load.p99_ms,
        non_200=load.non_200,
        errors=load.errors,
        server_cpu_pct=server_cpu,
        client_cpu_pct=client_cpu,
        baseline=phase.baseline,
        sent_all=warm.sent + load.sent,
        unanswered_all=warm.unanswered + load.unanswered,
        non_200_all=warm.non_200 + load.non_200,
        problems_all=warm.problems + load.problems,
    )


def json_body(**values: Any) -> str:
    return json.dumps(values, separators=(",", ":"))


def question_path(number: int, seed: int) -> str:
    return f"/api/v1/cards/{CARD_ID}/points/{number}/question?seed={seed}"


def baseline_phases(backend: str) -> list[Phase]:
    def inserts(count: int) -> list[Spec]:
        return [
            ("POST", "/insert", json_body(client_answer_id=str(uuid.uuid4()))) for _ in range(count)
        ]

    name = "SQLite" if backend == "sqlite" else "PostgreSQL"
    return [
        Phase("bare_json", "bare async JSON (baseline app)", lambda n: [("GET", "/json", "")] * n),
        Phase("bare_page", "bare Jinja page (baseline app)", lambda n: [("GET", "/page", "")] * n),
        Phase(
            "bare_insert",
            f"sync {name} insert (baseline app)",
            inserts,
            headers={"Content-Type": "application/json"},
        ),
    ]


def app_phases(
    server: Server, rng: random.Random, pool_size: int, answered: list[Spec], learners: int
) -> list[Phase]:
    """The app's endpoints; creates ``learners`` learners and fetches the question tokens first
    (with each learner's bearer token, so they are bound to it): ``pool_size`` distinct
    questions, one per answer POST, so that every answer is its learner's first to its question
    and rates a review. The POSTs take the learners in turn (each sent with its own token), as
    many learners answering at once would.

    The replay phase resends requests from ``answered``, which the caller fills with what the
    answer phase sent.
    """
    with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client:
        bearers = []
        for _ in range(learners):
            created = client.post("/api/v1/learners")
            if created.status_code != 201:
                raise BenchError(
                    f"POST /api/v1/learners answered {created.status_code}: {created.text}"
                )
            bearers.append(f"Authorization: Bearer {created.json()['access_token']}")
        cards = {card["id"]: card for card in client.get("/api/v1/cards").json()}
        if CARD_ID not in cards:
            raise BenchError(f"the app serves no card {CARD_ID!r} (it has {sorted(cards)})")
        points = [point["number"] for point in cards[CARD_ID]["points"]]
        per_learner = -(-pool_size // learners)
        shares: list[list[tuple[str, str, list[str]]]] = []
        for bearer in bearers:
            mine: list[tuple[str, str, list[str]]] = []
            seen: set[tuple[object, ...]] = set()
            while len(mine) < per_learner:
                response = client.get(
                    f"/api/v1/cards/{CARD_ID}/questions",
                    params={"count": QUESTION_BATCH},
                    headers=dict([bearer.split(": ", 1)]),
                )
                if response.status_code != 200:
                    raise BenchError(
                        f"fetching questions answered {response.status_code}: {response.text}"
                    )
                for question in response.json()["items"]:
                    key = (question["template_id"], question["template_version"], question["seed"])
                    if key not in seen and len(mine) < per_learner:
                        seen.add(key)
                        choices = [choice["id"] for choice in question["choices"]]
                        mine.append((bearer, question["token"], choices))
            shares.append(mine)
        # (bearer, token, choice ids), learner by learner in turn
        pool = [share[i] for i in range(per_learner) for share in shares][:pool_size]

    def questions(count: int) -> list[Spec]:
        return [
            ("GET", question_path(rng.choice(points), rng.randint(0, MAX_SEED)), "")
            for _ in range(count)
        ]

    answer_index = itertools.count()

    def answers(count: int) -> list[Spec]:
        specs = []
        for _ in range(count):
            i = next(answer_index)
            bearer, token, choices = pool[i % len(pool)]
            # Every choice in turn, so right and wrong answers (with pitfalls) are both stored.
            choice = choices[(i // learners) % len(choices)]
            body = json_body(token=token, choice_id=choice, client_answer_id=str(uuid.uuid4()))
            specs.append(("POST", "/api/v1/answers", body, bearer))
        return specs

    answer_phase = Phase(
        "answer",
        "POST /answers, new client_answer_id",
        answers,
        headers={"Content-Type": "application/json"},
        baseline="bare_insert",
    )

    def replays(count: int) -> list[Spec]:
        if not answered:
            raise BenchError("no answer was sent, so there is nothing to replay")
        return [answered[i % len(answered)] for i in range(count)]

    return [
        Phase(
            "healthz", "GET /healthz", lambda n: [("GET", "/healthz", "")] * n, baseline="bare_json"
        ),
        Phase(
            "question",
            "GET .../points/{n}/question?seed=",
            questions,
            baseline="bare_json",
            warm_up=question_warmup_count,
        ),
        answer_phase,
        Phase(
            "replay",
            "POST /answers, replayed client_answer_id",
            replays,
            headers=answer_phase.headers,
            baseline="bare_insert",
        ),
    ]


WEB_FORM = "application/x-www-form-urlencoded"


def web_phases(
    server: Server, rng: random.Random, pool_size: int, setup_ids: set[str], learners: int
) -> list[Phase]:
    """The web practice loop as a learner practises in the browser: ``learners`` browsers (each
    a guest with its session cookie that has answered once, so it has its learner) load question
    pages, ``GET /cards/{card}/points/{n}/practice?seed=`` (the stem and choices as MathML, the
    form), and post the answer form, ``POST /answers`` (the page's CSRF token, the question's
    token, a choice, a fresh ``client_answer_id``; answered 303 to the feedback page). Each POST
    answers its own question (``pool_size`` tokens fetched unbound from the API), so every one is
    a first answer. The ids of the browsers' first answers go to ``setup_ids``."""
    with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as api:
        cards = {card["id"]: card for card in api.get("/api/v1/cards").json()}
        points = [point["number"] for point in cards[CARD_ID]["points"]]
        questions: list[tuple[str, list[str]]] = []
        seen: set[tuple[object, ...]] = set()
        while len(questions) < pool_size + learners:
            response = api.get(
                f"/api/v1/cards/{CARD_ID}/questions", params={"count": QUESTION_BATCH}
            )
            if response.status_code != 200:
                raise BenchError(f"fetching questions answered {response.status_code}")
            for question in response.json()["items"]:
                key = (question["template_id"], question["template_version"], question["seed"])
                if key not in seen:
                    seen.add(key)
                    questions.append((question["token"], [c["id"] for c in question["choices"]]))
    browsers: list[tuple[str, str]] = []  # (its Cookie header line, its CSRF token)
    for number in range(learners):
        with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as web:
            page = web.get(web_question_path(points[number % len(points)], number))
            found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
            if page.status_code != 200 or found is None:
                raise BenchError(f"the question page answered {page.status_code} without a form")
            csrf = found.group(1)
            token, choices = questions.pop()
            first = uuid.uuid4().hex
            answered = web.post(
                "/answers",
                data={
                    "csrf_token": csrf,
                    "token": token,
                    "choice_id": choices[0],
                    "client_answer_id": first,
                },
                follow_redirects=False,
            )
            if answered.status_code != 303:
                raise BenchError(f"the answer form answered {answered.status_code}")
            setup_ids.add(first)
            cookie = "; ".join(f"{name}={value}" for name, value in web.cookies.items())
            browsers.append((f"Cookie: {cookie}", csrf))

    def pages(count: int) -> list[Spec]:
        return [
            (
                "GET",
                web_question_path(rng.choice(points), rng.randint(0, MAX_SEED)),
                "",
                browsers[i % learners][0],
            )
            for i in range(count)
        ]

    answer_index = itertools.count()

    def forms(count: int) -> list[Spec]:
        specs = []
        for _ in range(count):
            i = next(answer_index)
            cookie, csrf = browsers[i % learners]
            token, choices = questions[i % len(questions)]
            body = urlencode(
                {
                    "csrf_token": csrf,
                    "token": token,
                    "choice_id": choices[(i // learners) % len(choices)],
                    "client_answer_id": uuid.uuid4().hex,
                }
            )
            specs.append(("POST", "/answers", body, cookie))
        return specs

    return [
        Phase("web_question", "GET /cards/.../practice?seed= (page)", pages, baseline="bare_page"),
        Phase(
            "web_answer",
            "POST /answers (form, 303)",
            forms,
            headers={"Content-Type": WEB_FORM},
            baseline="bare_page",
            expect_status=303,
        ),
    ]


def web_question_path(number: int, seed: int) -> str:
    return f"/cards/{CARD_ID}/points/{number}/practice?seed={seed}"


def web_loop_ratio(question: float | None, answer: float | None) -> float | None:
    """The web practice loop's rate (a page GET and a form POST in turn) against the bare page:
    the harmonic mean of the two requests' ratios."""
    if not question or not answer:
        return None
    return 2 / (1 / question + 1 / answer)


def client_answer_ids(specs: list[Spec]) -> set[str]:
    return {
        json.loads(spec[2])["client_answer_id"]
        if spec[2].startswith("{")
        else parse_qs(spec[2])["client_answer_id"][0]
        for spec in specs
    }


def all_200(name: str, results: list[PhaseResult]) -> Check:
    sent = sum(len(r.sent_all) for r in results)
    non_200 = sum(r.non_200_all for r in results)
    unanswered = sum(r.unanswered_all for r in results)
    problems = sum((r.problems_all for r in results), Counter())
    detail = (
        f"{sent} sent (warm-up included), {non_200} answered other than 200, "
        f"{unanswered} without a response"
    )
    if problems:
        detail += " (" + "; ".join(f"{n} × {what}" for what, n in problems.most_common(5)) + ")"
    return Check(name, non_200 == 0 and unanswered == 0, detail)


def stored_once(name: str, rows: list[str], sent: set[str], unanswered: int) -> Check:
    """Every id sent is stored once, nothing else is; a request that got no response may or
    may not have been stored (a client would resend it with the same id)."""
    stored = set(rows)
    duplicated = len(rows) - len(stored)
    missing, extra = len(sent - stored), len(stored - sent)
    detail = (
        f"{len(rows)} rows for {len(sent)} distinct client_answer_ids sent "
        f"({missing} missing, {extra} unexpected, {duplicated} duplicated)"
    )
    return Check(name, duplicated == 0 and extra == 0 and missing <= unanswered, detail)


@dataclass
class ScenarioResult:
    name: str  # e.g. "SQLite, 1 worker"
    backend: str
    workers: int
    results: list[PhaseResult]
    checks: list[Check]
    web_loop_ratio: float | None = None


def run_scenario(db: Database, workers: int, opts: Options) -> ScenarioResult:
    """The baseline app and the app side by side on ``db`` with ``workers`` uvicorn workers
    each, loaded in ``opts.rounds`` interleaved rounds (every baseline phase, then every app
    phase, again and again: a machine whose speed drifts during the run slows both sides of a
    ratio alike); then the checks."""
    name = f"{'SQLite' if db.backend == 'sqlite' else 'PostgreSQL'}, {workers} worker" + (
        "s" if workers > 1 else ""
    )
    progress(f"{name}:")
    rng = random.Random(opts.seed)
    env = dict(os.environ)
    tag = f"{db.backend}-{workers}"
    data_dir = opts.workdir / f"data-{tag}"
    app_env = {
        **env,
        "DATABASE_URL": db.app_url,
        "DATA_DIR": str(data_dir),
        "SECRET_KEY": secrets.token_urlsafe(48),
    }
    # Its learners and browsers all come from 127.0.0.1: room for them under the new-learner
    # limits (the defaults allow 100 an hour from one address).
    room = f"{2 * opts.learners + 100}/hour"
    app_env.setdefault("NEW_LEARNERS_PER_ADDRESS", room)
    app_env.setdefault("NEW_LEARNERS_IN_ALL", room)
    progress("  migrating ...")
    migrate(app_env)
    answered: list[Spec] = []
    app_log = opts.workdir / f"app-{tag}.log"
    rounds: list[list[PhaseResult]] = []
    with (
        serve(
            "baseline",
            ["service_baseline:baseline_app", "--factory", "--app-dir", str(BENCH_DIR)],
            {**env, BASELINE_DB_ENV: db.baseline},
            "/json",
            opts.workdir / f"baseline-{tag}.log",
            opts.startup_timeout,
            workers,
            opts.server_args,
        ) as baseline,
        serve(
            "app",
            ["app.main:create_app", "--factory"],
            app_env,
            "/healthz",
            app_log,
            opts.startup_timeout,
            workers,
            opts.server_args,
        ) as server,
    ):
        pool = warmup_count(opts.requests) + opts.requests
        phases = [(p, baseline) for p in baseline_phases(db.backend)]
        phases += [(p, server) for p in app_phases(server, rng, pool, answered, opts.learners)]
        web_setup_ids: set[str] = set()
        phases += [(p, server) for p in web_phases(server, rng, pool, web_setup_ids, opts.learners)]
        # Once the answers' warm-up has filled the tables a little, statistics as on a live
        # database (PostgreSQL's autovacuum; see Database.analyze).
        for phase, _ in phases:
            if phase.key == "answer":
                phase.after_warm_up = db.analyze
        shares = [opts.requests // opts.rounds] * opts.rounds
        shares[-1] += opts.requests - sum(shares)
        for round_no, share in enumerate(shares):
            progress(f"  round {round_no + 1} of {opts.rounds}:")
            results_now = []
            for phase, target in phases:
                result = run_phase(phase, target, opts, share, warm_up=round_no == 0)
                if phase.key == "answer":
                    answered.extend(result.sent_all)
                results_now.append(result)
            rounds.append(results_now)
    results = [combine([r[i] for r in rounds]) for i in range(len(phases))]

    # Both servers are stopped: the databases are complete.
    by_key = {r.key: r for r in results}
    posts = [by_key["answer"], by_key["replay"], by_key["web_answer"]]
    sent_ids = client_answer_ids([spec for r in posts for spec in r.sent_all]) | web_setup_ids
    checks = [
        all_200("every POST /answers answered 200 (the form 303)", posts),
        stored_once(
            "attempts stored exactly once",
            db.client_answer_ids("attempts"),
            sent_ids,
            sum(r.unanswered_all for r in posts),
        ),
        all_200("every other request answered 200", [r for r in results if r not in posts]),
        stored_once(
            "baseline inserts stored exactly once",
            db.client_answer_ids(TABLE),
            client_answer_ids(by_key["bare_insert"].sent_all),
            by_key["bare_insert"].unanswered_all,
        ),
    ]
    if not all(check.ok for check in checks):
        for log in (opts.workdir / f"baseline-{tag}.log", app_log):
            progress(f"--- end of {log.name} ---\n{log_tail(log, 40)}")
    for i, r in enumerate(results):
        if r.baseline is None:
            continue
        ratios = []
        for done in rounds:
            base = next(x for x in done if x.key == r.baseline)
            if base.req_per_s > 0:
                ratios.append(done[i].req_per_s / base.req_per_s)
        r.ratio = statistics.median(ratios) if ratios else None
    loop = web_loop_ratio(by_key["web_question"].ratio, by_key["web_answer"].ratio)
    return ScenarioResult(name, db.backend, workers, results, checks, loop)


def combine(rounds: list[PhaseResult]) -> PhaseResult:
    """One phase over its rounds: requests and problems summed, the rate over the time loaded,
    the latencies and CPU shares the median of the rounds'."""

    def median(values: list[float | None]) -> float:
        known = [v for v in values if v is not None and not math.isnan(v)]
        return statistics.median(known) if known else math.nan

    seconds = sum(r.requests / r.req_per_s for r in rounds if r.req_per_s > 0)
    first = rounds[0]
    cpu = [r.server_cpu_pct for r in rounds]
    client = [r.client_cpu_pct for r in rounds]
    return PhaseResult(
        key=first.key,
        label=first.label,
        requests=sum(r.requests for r in rounds),
        req_per_s=sum(r.requests for r in rounds) / seconds if seconds > 0 else 0.0,
        p50_ms=median([r.p50_ms for r in rounds]),
        p99_ms=median([r.p99_ms for r in rounds]),
        non_200=sum(r.non_200 for r in rounds),
        errors=sum(r.errors for r in rounds),
        server_cpu_pct=None if all(c is None for c in cpu) else median(cpu),
        client_cpu_pct=None if all(c is None for c in client) else median(client),
        baseline=first.baseline,
        sent_all=[spec for r in rounds for spec in r.sent_all],
        unanswered_all=sum(r.unanswered_all for r in rounds),
        non_200_all=sum(r.non_200_all for r in rounds),
        problems_all=sum((r.problems_all for r in rounds), Counter()),
    )
