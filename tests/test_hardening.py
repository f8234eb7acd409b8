"""Hardening found by probing: trusted Host headers, HSTS, the request-body cap, request ids on
every log line and response, Prometheus metrics behind a token."""

from __future__ import annotations

import json
import logging
import random
import re
import sqlite3
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from conftest import CARD_ID, CARDS_DIR, make_settings
from fastapi.testclient import TestClient
from sqlalchemy import event

from app.main import create_app
from app.observability.logs import JsonFormatter

API = "/api/v1"
METRICS_TOKEN = "metrics-token-0123456789abcdef"


@pytest.fixture
def metered(tmp_path, db_url, cards):
    app = create_app(make_settings(tmp_path, db_url, metrics_token=METRICS_TOKEN), cards=cards)
    with TestClient(app) as client:
        yield app, client


def learner(client) -> dict[str, str]:
    response = client.post(f"{API}/learners")
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def a_question(client, seed=1) -> dict:
    response = client.get(
        f"{API}/cards/{CARD_ID}/points/optimizer-memory/question", params={"seed": seed}
    )
    assert response.status_code == 200, response.text
    return response.json()


# --- trusted hosts, HSTS ----------------------------------------------------------------------


def test_probes_answer_whatever_the_host_the_rest_stays_refused(client):
    """With TRUSTED_HOSTS set to the public name (as the README says), a load balancer's health
    check naming the machine's address (Host: 10.0.0.5:8000) got a 400 from /healthz and
    /readyz: every machine would be taken out of the pool."""
    for path in ("/healthz", "/readyz"):
        response = client.get(path, headers={"Host": "10.0.0.5:8000"})
        assert response.status_code == 200, (path, response.status_code)
    for path in ("/", f"{API}/cards", "/healthz/", "/readyz/x"):
        response = client.get(path, headers={"Host": "10.0.0.5:8000"}, follow_redirects=False)
        assert response.status_code == 400, (path, response.status_code)


def test_an_untrusted_host_is_refused_not_echoed_in_a_redirect(client):
    response = client.get("/static", headers={"Host": "evil.example"}, follow_redirects=False)
    assert response.status_code == 400
    assert "evil.example" not in response.headers.get("location", "")
    # The trusted ones (with a port too) still redirect to themselves.
    for host in ("testserver", "localhost:8000", "127.0.0.1:8000", "[::1]:8000"):
        ok = client.get("/static", headers={"Host": host}, follow_redirects=False)
        assert ok.status_code in (307, 404), (host, ok.status_code)
        assert "evil" not in ok.headers.get("location", "")


def test_trusted_hosts_come_from_the_settings(tmp_path, db_url, cards):
    settings = make_settings(tmp_path, db_url, trusted_hosts="cards.example.com, *.example.org")
    with TestClient(create_app(settings, cards=cards)) as client:
        for host, status in [
            ("cards.example.com", 200),
            ("eu.example.org", 200),
            ("testserver", 400),
            ("evil.example", 400),
        ]:
            assert client.get(f"{API}/cards", headers={"Host": host}).status_code == status, host


def test_an_untrusted_host_is_a_problem_document_on_the_api(client):
    response = client.get(f"{API}/cards", headers={"Host": "evil.example"})
    assert response.status_code == 400 and response.headers["x-request-id"]
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["code"] == "invalid_host" and "evil" not in response.text
    page = client.get("/", headers={"Host": "evil.example"})
    assert page.status_code == 400 and page.text == "Invalid host header"
    # A trusted host, remembered, still reaches the API.
    for _ in range(2):
        assert client.get(f"{API}/cards", headers={"Host": "localhost:8000"}).status_code == 200


def _run(coroutine):
    """Run a coroutine to its end in a thread of its own (a browser test may have left this
    thread inside a running event loop)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


HOST_VALUES = [
    "cards.example.com",
    "CARDS.example.com",
    "cards.example.com:8443",
    "eu.example.org",
    "a.b.example.org:1",
    "example.org",
    "www.cards.example.com",
    "evil.example",
    "cards.example.com.evil.example",
    "[::1]",
    "[::1]:8000",
    "[::1",
    "[zz::1]:8000",
    "cards.example.com:",
    "cards.example.com:x",
    "",
    " cards.example.com",
    "caf\u00e9.example.org",
    None,
]


@pytest.mark.parametrize("allowed", [["cards.example.com", "*.example.org", "[::1]"], ["*"]])
def test_trusted_hosts_judge_every_host_as_starlette_does_and_remember_only_trusted_ones(allowed):
    """TrustedHosts remembers Starlette's verdict per Host value: each value, asked twice (the
    second answer from the memo when trusted), is let through or refused exactly as Starlette's
    own TrustedHostMiddleware does; the first Host header counts when there are two."""
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    from app.observability.guards import TrustedHosts

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"in"})

    async def status(middleware, hosts):
        sent = []

        async def send(message):
            sent.append(message)

        async def receive():
            return {"type": "http.request", "body": b""}

        headers = [(b"host", h.encode("latin-1")) for h in hosts if h is not None]
        scope = {"type": "http", "method": "GET", "path": "/", "headers": headers, "state": {}}
        await middleware(scope, receive, send)
        return sent[0]["status"], sent[-1]["body"]

    ours = TrustedHosts(inner, allowed_hosts=allowed)
    theirs = TrustedHostMiddleware(inner, allowed_hosts=allowed, www_redirect=False)
    pairs = [[h] for h in HOST_VALUES] + [["evil.example", "cards.example.com"]]
    pairs += [["cards.example.com", "evil.example"]]
    for hosts in pairs * 2:
        expected = _run(status(theirs, hosts))
        assert _run(status(ours, hosts)) == expected, hosts
    trusted = {h for h in HOST_VALUES if _run(status(theirs, [h]))[0] == 200}
    if allowed != ["*"]:
        assert ours._trusted == trusted
        assert trusted >= {"cards.example.com", "eu.example.org", "[::1]:8000"}
        assert "evil.example" not in trusted


def test_trusted_hosts_keep_a_bounded_number_of_values():
    from app.observability.guards import TrustedHosts

    async def inner(scope, receive, send):
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def get(host):
        sent = []

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "path": "/", "headers": [(b"host", host.encode())], "state": {}}
        await middleware(scope, None, send)
        return sent[0]["status"]

    middleware = TrustedHosts(inner, allowed_hosts=["*.example.org"])
    for port in range(TrustedHosts.KEPT + 50):
        assert _run(get(f"a.example.org:{port}")) == 204
    assert len(middleware._trusted) == TrustedHosts.KEPT
    assert _run(get("a.example.com")) == 400


def test_hsts_in_production_only(tmp_path, db_url, cards, client):
    assert "strict-transport-security" not in client.get("/healthz").headers
    settings = make_settings(tmp_path, db_url, environment="production")
    with TestClient(create_app(settings, cards=cards), base_url="https://testserver") as prod:
        for path in ("/healthz", "/static/style.css", f"{API}/cards"):
            hsts = prod.get(path).headers["strict-transport-security"]
            assert hsts == "max-age=31536000; includeSubDomains"


# --- the body limits ---------------------------------------------------------------------------

MIB = 1024 * 1024
JSON = {"content-type": "application/json"}
FORM = {"content-type": "application/x-www-form-urlencoded"}


def chunked(size: int) -> Iterator[bytes]:
    """A body of ``size`` bytes sent without Content-Length (chunked transfer encoding)."""
    for start in range(0, size, 65536):
        yield b"x" * min(65536, size - start)


def assert_too_large(response, limit: int) -> None:
    assert response.status_code == 413, response.text[:300]
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "payload_too_large" and body["limit_bytes"] == limit
    assert f"The limit here is {limit // MIB} MiB ({limit} bytes)." in body["detail"]
    assert response.headers["x-request-id"] and response.headers["connection"] == "close"


def assert_too_large_page(response, limit: int) -> None:
    assert response.status_code == 413, response.text[:300]
    assert "text/html" in response.headers["content-type"]
    assert f"{limit} bytes" in response.text and response.headers["x-request-id"]


def test_a_body_over_the_cap_is_a_413_problem(client):
    assert_too_large(client.post(f"{API}/answers", content=b"x" * (MIB + 1), headers=JSON), MIB)
    assert_too_large(client.post(f"{API}/answers", content=chunked(20 * 65536), headers=JSON), MIB)
    # Under the cap, chunked or not, the request goes on (here: no token, 401).
    small = client.post(f"{API}/answers", content=iter([b"{}"]), headers=JSON)
    assert small.status_code == 401


@pytest.mark.parametrize("path", [f"{API}/answers/batch", f"{API}/auth/register"])
def test_a_body_over_the_cap_on_a_path_operation_is_a_413_problem(client, path):
    """The answer POST above is a hot route (its limit Starlette's middleware); these are
    FastAPI path operations, their limit the route's ``max_body_size``."""
    assert_too_large(client.post(path, content=b"x" * (MIB + 1), headers=JSON), MIB)
    assert_too_large(client.post(path, content=chunked(MIB + 1), headers=JSON), MIB)
    assert client.post(path, content=b"x" * MIB, headers=JSON).status_code == 422


def test_a_declared_body_over_the_cap_is_refused_where_the_route_reads_none(client):
    """A route that reads no body: Starlette answers a declared Content-Length over the limit
    itself (plain text "Content Too Large"); the client gets the problem document all the
    same. Sent chunked, the body is never read and the route answers."""
    assert_too_large(client.post(f"{API}/learners", content=b"x" * (MIB + 1), headers=JSON), MIB)
    assert client.post(f"{API}/learners", content=chunked(MIB + 1)).status_code == 201


def test_a_page_form_over_the_cap_is_a_413_page(client):
    assert_too_large_page(client.post("/answers", content=b"a=" + b"x" * MIB, headers=FORM), MIB)
    assert_too_large_page(client.post("/answers", content=chunked(MIB + 1), headers=FORM), MIB)


def test_card_documents_may_be_larger(client):
    big = {"id": "x", "padding": "y" * (2 * MIB)}  # 2 MiB: the authoring limit
    response = client.post(f"{API}/instructor/cards", json=big)
    assert response.status_code == 401  # past the cap; refused for want of a token
    document = json.dumps(big).encode()
    pieces = (document[i : i + 65536] for i in range(0, len(document), 65536))  # chunked
    assert client.post(f"{API}/instructor/cards", content=pieces, headers=JSON).status_code == 401
    for content in (b"x" * (4 * MIB + 1), chunked(4 * MIB + 1)):
        huge = client.post(f"{API}/instructor/cards", content=content, headers=JSON)
        assert_too_large(huge, 4 * MIB)
    # The instructor's pages too.
    page = client.post("/instructor/cards", content=b"a=" + b"x" * (2 * MIB), headers=FORM)
    assert page.status_code != 413
    for content in (b"a=" + b"x" * (4 * MIB), chunked(4 * MIB + 1)):
        assert_too_large_page(
            client.post("/instructor/cards", content=content, headers=FORM), 4 * MIB
        )


def test_a_refused_body_is_no_error_in_the_log(client, log_lines):
    for content in (b"x" * (MIB + 1), chunked(MIB + 1)):
        for path in (f"{API}/answers", f"{API}/learners"):
            client.post(path, content=content, headers=JSON)
    assert not [line for line in log_lines if line["level"] in ("error", "critical")]
    access = [line for line in log_lines if line["logger"] == "app.access"]
    assert {line["route"] for line in access} == {f"{API}/answers", f"{API}/learners"}


def test_every_route_that_takes_a_body_has_its_limit(app):
    from fastapi.routing import APIRoute

    from app.routing import HotRoute

    limited = {}
    for route in app.routes:
        if isinstance(route, (APIRoute, HotRoute)) and route.methods - {"GET", "HEAD"}:
            limited[route.path] = route.max_body_size
    assert limited[f"{API}/answers"] == limited["/answers"] == MIB
    assert limited[f"{API}/instructor/cards"] == limited["/instructor/cards"] == 4 * MIB
    assert set(limited.values()) == {MIB, 4 * MIB}, limited


def test_a_batch_of_500_real_answers_fits_under_the_cap(client):
    headers = learner(client)
    body = a_question(client)
    items = [
        {"token": body["token"], "choice_id": "a", "client_answer_id": str(uuid.uuid4())}
        for _ in range(500)
    ]
    payload = json.dumps({"answers": items}).encode()
    assert len(payload) < 1024 * 1024
    response = client.post(
        f"{API}/answers/batch",
        content=payload,
        headers={**headers, "content-type": "application/json"},
    )
    assert response.status_code != 413, response.text[:300]


# --- request ids and JSON logs ----------------------------------------------------------------


class Lines(logging.Handler):
    """Formats each record as it is logged (the request id is a context variable)."""

    def __init__(self) -> None:
        super().__init__()
        self.formatter = JsonFormatter()
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def log_lines():
    handler = Lines()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler.lines
    root.removeHandler(handler)


def test_a_password_reset_link_is_not_written_to_the_access_log(client, log_lines):
    """The link's token let whoever read the log choose the account's password within the hour:
    every access line showed it in its path and its message."""
    token = "reset-token-" + "k" * 30
    client.get(f"/password-reset/{token}")
    client.post(f"/password-reset/{token}", data={"password": "x"})
    access = [line for line in log_lines if line["logger"] == "app.access"]
    assert len(access) == 2 and all(line["route"] == "/password-reset/{token}" for line in access)
    assert all(line["path"] == "/password-reset/{token}" for line in access)
    assert token not in json.dumps(log_lines)


def test_every_response_has_a_request_id(client):
    first = client.get("/healthz").headers["x-request-id"]
    second = client.get("/healthz").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", first) and first != second
    kept = client.get("/healthz", headers={"X-Request-ID": "edge-7f3a.42:1"})
    assert kept.headers["x-request-id"] == "edge-7f3a.42:1"
    for insane in ("x" * 200, "a b", "<script>", "_leading", "a/b"):
        replaced = client.get("/healthz", headers={"X-Request-ID": insane})
        assert re.fullmatch(r"[0-9a-f]{32}", replaced.headers["x-request-id"]), insane
    # Errors too: a 404 problem, a 413, a refused host.
    assert client.get(f"{API}/nothing").headers["x-request-id"]
    assert client.get("/", headers={"Host": "evil.example"}).headers["x-request-id"]


def test_log_lines_are_json_with_the_request_id(app, client, log_lines):
    response = client.get(f"{API}/cards", headers={"X-Request-ID": "trace-1"})
    access = [line for line in log_lines if line["logger"] == "app.access"]
    assert access[-1]["request_id"] == "trace-1" and access[-1]["route"] == f"{API}/cards"
    assert access[-1]["status"] == 200 and access[-1]["duration_ms"] >= 0
    assert {"time", "level", "logger", "message", "request_id"} <= set(access[-1])
    assert response.headers["x-request-id"] == "trace-1"

    # A line written in the worker thread that ran the request carries it as well.
    def full(cursor, statement, parameters, context):
        if statement.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")

    event.listen(app.state.engine, "do_execute", full)
    failed = client.post(f"{API}/learners", headers={"X-Request-ID": "trace-2"})
    assert failed.status_code == 503
    warning = [line for line in log_lines if line["logger"] == "app.errors"][-1]
    assert warning["request_id"] == "trace-2" and "disk_full" in warning["message"]
    assert all(line["request_id"] == "-" or line["request_id"] for line in log_lines)


def test_a_json_line_has_its_fields_then_the_record_s_extra_ones():
    formatter = JsonFormatter()
    logger = logging.getLogger("app.test")
    extra = {"color_message": "\x1b[1mcoloured\x1b[0m", "card_id": "zero"}
    record = logger.makeRecord("app.test", logging.WARNING, __file__, 1, "café %s", ("ok",), None)
    record.__dict__.update(extra)
    text = formatter.format(record)
    line = json.loads(text)
    assert list(line) == ["time", "level", "logger", "message", "request_id", "card_id"]
    assert line["level"] == "warning" and line["logger"] == "app.test"
    assert line["message"] == "café ok" and "café" in text  # not escaped
    assert line["request_id"] == "-" and line["card_id"] == "zero"  # uvicorn's colours left out
    try:
        raise ValueError("boom")
    except ValueError:
        failed = logger.makeRecord("app.test", logging.ERROR, __file__, 1, "x", (), sys.exc_info())
    assert "ValueError: boom" in json.loads(formatter.format(failed))["exception"]


def test_a_log_line_s_time_is_utc_to_the_millisecond():
    from app.observability.logs import log_time

    # 2026-12-01 16:43:56.165 UTC and the instants around a second's and a day's turn.
    assert log_time(1796143436.1659) == "2026-12-01T16:43:56.165+00:00"
    assert log_time(1796143436.0) == "2026-12-01T16:43:56.000+00:00"
    assert log_time(1796143435.9996) == "2026-12-01T16:43:55.999+00:00"
    assert log_time(1796169599.999) == "2026-12-01T23:59:59.999+00:00"
    assert log_time(1796169600.0) == "2026-12-02T00:00:00.000+00:00"
    # As datetime writes them, rounding to the microsecond included.
    rng = random.Random(9)
    for _ in range(5000):
        created = rng.uniform(1.7e9, 1.9e9)
        for instant in (created, round(created, 3), round(created, 6)):
            expected = datetime.fromtimestamp(instant, UTC).isoformat(timespec="milliseconds")
            assert log_time(instant) == expected


# --- metrics ----------------------------------------------------------------------------------


def scrape(client) -> str:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f'{key}="{value}"' in line for key, value in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_metrics_need_the_token_and_are_off_without_one(client, metered):
    assert client.get("/metrics").status_code == 404  # METRICS_TOKEN unset: no metrics at all
    _app, metered_client = metered
    assert metered_client.get("/metrics").status_code == 401
    wrong = metered_client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert "/metrics" not in metered_client.get("/openapi.json").json()["paths"]


def test_metrics_count_latency_per_route_answers_and_database_errors(metered):
    app, client = metered
    headers = learner(client)
    for seed in (1, 2):
        body = a_question(client, seed=seed)
        answer = client.post(
            f"{API}/answers",
            json={"token": body["token"], "choice_id": "a", "client_answer_id": str(uuid.uuid4())},
            headers=headers,
        )
        assert answer.status_code in (200, 201), answer.text
    text = scrape(client)
    route = f"{API}/cards/{{card_id}}/points/{{point}}/question"
    count = "infracards_http_request_duration_seconds_count"
    assert sample(text, count, route=route, method="GET", status="200") == 2
    assert sample(text, count, route=f"{API}/answers", method="POST") == 2
    assert "seed=1" not in text and "/points/optimizer-memory" not in text  # templates only
    assert sample(text, "infracards_answers_stored_total") == 2

    def full(cursor, statement, parameters, context):
        if statement.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")

    event.listen(app.state.engine, "do_execute", full)
    assert client.post(f"{API}/learners").status_code == 503
    text = scrape(client)
    assert sample(text, "infracards_database_errors_total", kind="disk_full") == 1
    assert sample(text, count, route=f"{API}/learners", status="503") == 1
    assert sample(text, "infracards_answers_stored_total") == 2


def test_an_unhandled_error_is_logged_and_answered_with_its_request_id(app, log_lines):
    def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route(f"{API}/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get(f"{API}/boom", headers={"X-Request-ID": "bug-1"})
    assert response.status_code == 500 and response.headers["x-request-id"] == "bug-1"
    assert response.json()["code"] == "internal_error" and "bug-1" in response.json()["detail"]
    assert response.headers["x-content-type-options"] == "nosniff"  # security headers too
    assert response.headers["connection"] == "close"  # the server closes it: not reused
    error = next(line for line in log_lines if line["message"].startswith("unhandled error"))
    assert error["request_id"] == "bug-1" and "RuntimeError: a bug" in error["exception"]


# --- the cyclic garbage collector under load ---------------------------------------------------


def test_a_running_server_freezes_its_start_up_heap_and_undoes_it_at_shutdown(
    tmp_path, db_url, cards
):
    """A full collection scans every live object: unfrozen, the cards' warmed combinations make
    each one a pause of ~0.2 s under load (measured with bench-service). While the server runs
    they are frozen and young objects are collected less often; shutdown restores both."""
    import gc

    from app.main import GC_THRESHOLDS

    before = gc.get_threshold()
    app = create_app(make_settings(tmp_path, db_url, gc_freeze=True), cards=cards)
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() > 10_000  # the cards and all that start-up built
        assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    app = create_app(make_settings(tmp_path, db_url, gc_freeze=False), cards=cards)
    with TestClient(app):
        assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_response_headers_are_stamped_in_one_pass_keeping_or_replacing_the_responses_own():
    from app.observability.request_context import stamp_headers

    message = {
        "type": "http.response.start",
        "status": 200,
        "headers": [(b"X-Frame", b"own"), (b"X-Request-ID", b"theirs")],
    }
    stamp_headers(message, (b"x-request-id", b"ours"), [(b"x-frame", b"policy"), (b"x-new", b"1")])
    assert message["headers"] == [
        (b"X-Frame", b"own"),
        (b"x-new", b"1"),
        (b"x-request-id", b"ours"),
    ]
    bare = {"type": "http.response.start", "status": 204}
    stamp_headers(bare, (b"x-request-id", b"abc"), ())
    assert bare["headers"] == [(b"x-request-id", b"abc")]


# --- X-Forwarded-For from anyone -------------------------------------------------------------


def served_flags(**variables: str) -> list[str]:
    """The flags ``make run`` passes uvicorn after ``--port`` (read from ``make -n run``)."""
    import shlex
    import subprocess

    from conftest import ROOT

    assigned = [f"{name}={value}" for name, value in variables.items()]
    dry = subprocess.run(
        ["make", "-n", "run", *assigned], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    serve = next(line for line in dry.splitlines() if "uvicorn app.main:create_app" in line)
    words = shlex.split(serve)
    return words[words.index("--port") + 2 :]


def test_make_run_believes_forwarded_addresses_only_from_named_proxies() -> None:
    assert served_flags() == ["--no-proxy-headers"]
    assert served_flags(TRUSTED_PROXIES="10.0.0.2,10.0.1.0/24") == [
        "--proxy-headers",
        "--forwarded-allow-ips",
        "10.0.0.2,10.0.1.0/24",
    ]


def test_a_spoofed_forwarded_address_per_guess_still_meets_the_address_limit(tmp_path) -> None:
    """The server as ``make run`` starts it, guessed at from loopback with a new
    X-Forwarded-For on every try (before: uvicorn believed loopback, 40 guesses gave 40 × 401):
    the per-address limit (30 a minute) answers 429 from the 31st guess on."""
    from live_servers import ServerProcess, server_env

    from app.cli import migrate

    url = f"sqlite:///{tmp_path / 'spoof.db'}"
    migrate(url)
    server = ServerProcess(
        server_env(tmp_path / "data", url), tmp_path / "server.log", extra_args=served_flags()
    )
    try:
        server.wait_ready(timeout_s=180)  # start-up compiles the cards: slow on a loaded machine
        statuses = []
        with server.client() as client:
            for guess in range(40):
                response = client.post(
                    "/api/v1/auth/token",
                    json={
                        "email": f"someone{guess}@example.com",
                        "password": "not it at all",
                        "device_name": "a script",
                    },
                    headers={"X-Forwarded-For": f"203.0.113.{guess + 1}"},
                )
                statuses.append(response.status_code)
        assert set(statuses[:30]) == {401}, statuses
        assert set(statuses[30:]) == {429}, statuses
    finally:
        server.stop()


# --- text and numbers no database stores ------------------------------------------------------


JSON = {"Content-Type": "application/json"}


def as_json(body: object) -> str:
    """JSON as a client library writes it: lone surrogates as \\u escapes."""
    import json as jsonlib

    return jsonlib.dumps(body)


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db_url(request, tmp_path, db_url):
    if request.param == "sqlite":
        return db_url
    from app.cli import migrate

    url = request.getfixturevalue("pg_url")
    migrate(url)
    return url


def test_nul_surrogates_and_non_finite_numbers_are_422s_on_both_databases(
    tmp_path, any_db_url, cards
):
    """PostgreSQL refuses a NUL in text and NaN in JSON, SQLite a lone surrogate: each arrives as
    a 422 problem (or a page) saying what is wrong, never a 500, and nothing is stored."""
    import copy
    import json as jsonlib
    from pathlib import Path

    from test_authoring import instructor_headers

    from app.models import CardVersion, Learner

    card = jsonlib.loads(
        (Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text()
    )
    app = create_app(make_settings(tmp_path, any_db_url), cards=cards)
    with TestClient(app, raise_server_exceptions=False) as client:
        prof = instructor_headers(client, app, email=f"p{uuid.uuid4().hex[:6]}@example.com")
        for field, value in [
            ("id", "kv\x00cache"),
            ("title", {"en": "KV\x00cache", "zh": "KV 缓存"}),
            ("definition", {"en": "fine", "zh": "坏\ud800字"}),
        ]:
            bad = {**copy.deepcopy(card), field: value}
            response = client.post(
                f"{API}/instructor/cards", content=as_json(bad), headers={**prof, **JSON}
            )
            assert response.status_code == 422, (field, response.status_code, response.text)
            assert "NUL" in response.text or "surrogate" in response.text, response.text
        for number in ("NaN", "Infinity", "-Infinity"):
            text = jsonlib.dumps(card).replace('"values": [', f'"values": [{number}, ', 1)
            assert number in text
            response = client.post(
                f"{API}/instructor/cards",
                content=text,
                headers={**prof, "Content-Type": "application/json"},
            )
            assert response.status_code == 422, (number, response.status_code, response.text)
        for path, body in [
            ("/auth/token", {"email": "a\x00@x.io", "password": "p" * 12, "device_name": "d"}),
            ("/auth/register", {"email": "a\x00@x.io", "password": "p" * 12}),
            ("/auth/register", {"email": "a\ud800@x.io", "password": "p" * 12}),
        ]:
            response = client.post(f"{API}{path}", content=as_json(body), headers=JSON)
            assert 400 <= response.status_code < 500, (path, body, response.status_code)
        page = client.get("/login")
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        for form in ("/login", "/signup"):
            response = client.post(
                form,
                data={"csrf_token": csrf, "email": "a\x00@x.io", "password": "p" * 12},
            )
            assert 400 <= response.status_code < 500, (form, response.status_code)
        with app.state.sessionmaker() as db:
            assert (
                db.query(CardVersion)
                .filter(CardVersion.card_id.not_in([p.stem for p in CARDS_DIR.glob("*.yaml")]))
                .count()
                == 0
            )
            assert db.query(Learner).filter(Learner.email.like("a%@x.io")).count() == 0


def navigation(page: str) -> str:
    found = re.search(r"<nav[^>]*>(.*?)</nav>", page, re.S)
    assert found, page[:300]
    return found[1]


def test_an_error_page_shows_a_signed_in_instructor_their_own_navigation(client, app):
    """A 404 at an unknown address and a 413 for a form over its limit are answered before any
    route reads who is looking: their navigation offered a signed-in instructor "Log in" and no
    dashboard, as if the session had ended."""
    from test_authoring_web import log_in

    log_in(client, app)
    for response in (
        client.get("/no-such-page"),
        client.post("/answers", content=b"a=" + b"x" * MIB, headers=FORM),
        client.post("/answers", content=chunked(MIB + 1), headers=FORM),
    ):
        assert response.status_code in (404, 413), response.text[:300]
        nav = navigation(response.text)
        assert 'href="/account"' in nav and 'href="/instructor"' in nav, nav
        assert 'href="/login"' not in nav, nav
    # A visitor without a session still gets the guest's navigation.
    client.cookies.clear()
    nav = navigation(client.get("/no-such-page").text)
    assert 'href="/login"' in nav and 'href="/account"' not in nav


def test_head_answers_as_get_without_the_body(client):
    """RFC 9110 asks every server for HEAD where it answers GET: a load balancer's or uptime
    monitor's ``HEAD /healthz`` (or ``curl -I``) was a 405 on every route but /static."""
    for path in ("/healthz", "/readyz", "/", "/cards", f"{API}/cards", "/static/style.css"):
        get, head = client.get(path), client.head(path)
        assert head.status_code == get.status_code == 200, path
        assert head.content == b"", path
        assert head.headers["content-type"] == get.headers["content-type"], path
        assert head.headers["x-request-id"]
    # Where GET is refused, so is HEAD; a route's 405 names both.
    assert client.head("/no-such-page").status_code == 404
    refused = client.put(f"{API}/cards")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
