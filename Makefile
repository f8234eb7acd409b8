# Quick start: `make run` serves the app, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
PIP := $(BIN)/python -m pip
PIP_FLAGS := --disable-pip-version-check -q
# The lock files (pip-tools, exact versions and hashes): requirements.txt for the server,
# requirements-test.txt for the suite, the demo and the linters (the same versions and more).
LOCK := requirements.txt
TEST_LOCK := requirements-test.txt
PIP_TOOLS := pip-tools==7.7.0
COMPILE = $(BIN)/pip-compile -q --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links --all-build-deps

.PHONY: run test install install-test migrate catalogs messages lint lock upgrade demo bench bench-service bench-instructions bench-publish clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python $(LOCK) pyproject.toml
	$(PIP) install $(PIP_FLAGS) --require-hashes --no-deps -r $(LOCK)
	$(PIP) install $(PIP_FLAGS) --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed $(TEST_LOCK)
	$(PIP) install $(PIP_FLAGS) --require-hashes --no-deps -r $(TEST_LOCK)
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# The message catalogs (app/locale/<lang>/LC_MESSAGES/messages.po) compiled for gettext: the
# .mo files are build output (not committed), and the app refuses to start without them.
LOCALE := app/locale
PO_FILES := $(wildcard $(LOCALE)/*/LC_MESSAGES/messages.po)
MO_FILES := $(PO_FILES:.po=.mo)

$(LOCALE)/%/LC_MESSAGES/messages.mo: $(LOCALE)/%/LC_MESSAGES/messages.po $(VENV)/.installed
	$(BIN)/pybabel compile --statistics -i $< -o $@ -l $*

catalogs: $(MO_FILES)

# Re-extract the msgids (English source texts) from app/ and the templates into messages.pot and
# merge them into every language's .po; translate the new or fuzzy entries, then `make catalogs`.
# A new language: $(BIN)/pybabel init -l LANG -i $(LOCALE)/messages.pot -d $(LOCALE)
messages: install
	$(BIN)/pybabel extract -F babel.cfg -o $(LOCALE)/messages.pot --add-location=file --sort-output \
	  --project=infracards --version=0.1.0 --copyright-holder=infracards .
	$(BIN)/pybabel update -i $(LOCALE)/messages.pot -d $(LOCALE) --ignore-obsolete --update-header-comment

migrate: install
	$(BIN)/python -m app.cli migrate

# X-Forwarded-For is believed only from the proxies named in TRUSTED_PROXIES (addresses or
# networks, comma-separated; empty by default): uvicorn's own default believes any loopback
# client, so anyone on the machine could pick the address the login limits count.
TRUSTED_PROXIES ?=
PROXY_FLAGS = $(if $(strip $(TRUSTED_PROXIES)),--proxy-headers --forwarded-allow-ips '$(TRUSTED_PROXIES)',--no-proxy-headers)

run: migrate catalogs
	$(BIN)/python -m app.cli check-cards
	$(BIN)/uvicorn app.main:create_app --factory --http httptools --loop asyncio --host $(HOST) --port $(PORT) $(PROXY_FLAGS)

# The browser tests (tests/browser) drive Debian's Chromium and need CJK fonts: installed when missing.
BROWSER_DEBS := chromium fonts-noto-cjk fonts-noto-core

test: install-test catalogs
	@test -x /usr/bin/chromium && test -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc || \
	  (DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	   DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(BROWSER_DEBS))
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# Every check runs, and lint fails when any did; mypy reads files and strictness from pyproject.toml.
lint: install-test
	status=0; \
	$(BIN)/ruff check app tests bench || status=1; \
	$(BIN)/ruff format --check app tests bench migrations || status=1; \
	$(BIN)/mypy || status=1; \
	exit $$status

demo: install-test
	$(BIN)/python -m app.zero_demo --world-size 4

bench: install-test
	$(BIN)/python bench/zero_demo.py

# wrk drives the load (installed with apt-get when missing); SQLite and, when it answers,
# PostgreSQL (TEST_POSTGRES_URL or 127.0.0.1:5432/test), one and two workers.
bench-service: install-test catalogs
	@command -v wrk >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk) || \
	  (echo "wrk is missing: apt-get install -y wrk" >&2; exit 2)
	$(BIN)/python bench/service.py $(BENCH_ARGS)

# Instructions per request under Valgrind's callgrind (installed with apt-get when missing),
# in process, free of the machine's noise: /healthz and the question GET against the bare JSON
# endpoint, the answer POST against the one-row insert.
bench-instructions: install-test catalogs
	@command -v valgrind >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind) || \
	  (echo "valgrind is missing: apt-get install -y valgrind" >&2; exit 2)
	$(BIN)/python bench/instructions.py $(BENCH_ARGS)

# Publishing the shipped card as versions 1..50 through the dashboard's service functions:
# publish and restart times at versions 1, 10 and 50 (flat: within 20 %), a learner's question
# p99 while a publication runs against the idle one (bench/publish.py).
bench-publish: install-test catalogs
	$(BIN)/python bench/publish.py $(BENCH_ARGS)

# The lock files again from pyproject.toml (after a dependency is added or its floor moved),
# keeping every locked version that still fits.
lock: $(BIN)/python
	$(PIP) install $(PIP_FLAGS) $(PIP_TOOLS)
	$(COMPILE) $(LOCK_ARGS) --extra test --extra postgres --extra demo -c constraints.txt \
	  -o $(TEST_LOCK) pyproject.toml
	$(COMPILE) $(LOCK_ARGS) -c $(TEST_LOCK) -o $(LOCK) pyproject.toml

# The newest releases pyproject.toml admits, locked, installed and tested.
upgrade:
	$(MAKE) lock LOCK_ARGS=--upgrade
	$(MAKE) test

clean:
	rm -rf $(VENV) .pytest_cache
