"""Layering: the engine stays plain Python without cycles, use cases know nothing of the web,
identity lives in one package both front ends use, languages are declared once, and the web
server never imports torch."""

import ast
import os
import subprocess
import sys
from pathlib import Path

from live_servers import SERVED_CARDS_DIR

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_DOMAIN = {
    "fastapi",
    "starlette",
    "sqlalchemy",
    "alembic",
    "jinja2",
    "torch",
    "app.web",
    "app.api",
    "app.services",
    "app.models",
    "app.db",
    "app.auth",
    "app.catalog",
    "app.practice",
    "app.review",
}
WEB = {"fastapi", "jinja2", "app.web", "app.api", "app.deps", "app.errors"}
USE_CASE_PACKAGES = ("auth", "catalog", "practice", "review", "authoring", "analytics")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_domain_has_no_web_database_or_torch_imports():
    for path in (ROOT / "app" / "domain").glob("*.py"):
        for name in imported_modules(path):
            top = {name, name.split(".")[0], ".".join(name.split(".")[:2])}
            assert not (top & FORBIDDEN_IN_DOMAIN), f"{path.name} imports {name}"


def test_no_code_executing_sympy_entry_points_in_the_service():
    calls = {"sympify", "parse_expr", "lambdify", "eval", "exec"}
    for path in (ROOT / "app").rglob("*.py"):
        if "zero_demo" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                assert name not in calls, f"{path.relative_to(ROOT)}:{node.lineno} calls {name}"


def test_the_web_app_does_not_import_torch():
    code = (
        "import sys; from app.main import create_app; create_app(); "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith('app.zero_demo')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    # The cards it serves do not change what it imports: one card, validated in seconds.
    env = {**os.environ, "CARDS_DIR": str(SERVED_CARDS_DIR)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _domain_graph() -> dict[str, set[str]]:
    graph = {}
    for path in (ROOT / "app" / "domain").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                deps.add(node.module)
            elif (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("app.domain.")
            ):
                deps.add(node.module.removeprefix("app.domain."))
        graph[path.stem] = deps
    return graph


def test_the_domain_has_no_import_cycle():
    graph = _domain_graph()
    assert "validation" not in graph["cards"] and "generation" not in graph["cards"]
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        if state.get(module) == "done":
            return
        assert state.get(module) != "open", "import cycle: " + " -> ".join([*trail, module])
        state[module] = "open"
        for dep in graph.get(module, ()):
            visit(dep, [*trail, module])
        state[module] = "done"

    for module in graph:
        visit(module, [])


def test_use_cases_know_nothing_of_the_web():
    for package in USE_CASE_PACKAGES:
        for path in (ROOT / "app" / package).glob("*.py"):
            allowed = {"starlette"} if path.name == "cookies.py" else set()  # the cookie middleware
            for name in imported_modules(path):
                top = {name, name.split(".")[0], ".".join(name.split(".")[:2])}
                assert not (top & (WEB | {"starlette"}) - allowed), (
                    f"app/{package}/{path.name} imports {name}"
                )


def test_identity_and_sessions_live_in_one_package_both_front_ends_use():
    assert not (ROOT / "app" / "web" / "session.py").exists()
    assert not (ROOT / "app" / "services").exists()
    deps = imported_modules(ROOT / "app" / "deps.py")
    assert {"app.auth.service", "app.auth.cookies"} <= deps
    for front in ("api", "web"):
        users = [
            p
            for p in (ROOT / "app" / front).glob("*.py")
            if any(m.startswith("app.auth") or m == "app.deps" for m in imported_modules(p))
        ]
        assert users, f"app/{front} does not authenticate through app.auth"
    # Nothing else hashes secrets or reads the session cookie.
    for path in (ROOT / "app").rglob("*.py"):
        if "auth" in path.parts or "zero_demo" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert "hashlib.sha256(token" not in text and "COOKIE_NAME =" not in text, path


def test_the_languages_are_declared_once():
    for path in (ROOT / "app").rglob("*.py"):
        if path.name == "languages.py" or "zero_demo" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert '("en", "zh")' not in text and 'Literal["en", "zh"]' not in text, path


# The application shell (app/ outside the domain and the torch demo) in modules one can read
# whole: a module grown past this is split by concern (a package of modules, one per use case,
# page group or command group).
MAX_SHELL_MODULE_LINES = 400


def test_no_module_of_the_shell_is_over_400_lines():
    too_long = {}
    for path in (ROOT / "app").rglob("*.py"):
        where = path.relative_to(ROOT).as_posix()
        if path.relative_to(ROOT / "app").parts[0] in {"domain", "zero_demo"}:
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_SHELL_MODULE_LINES:
            too_long[where] = lines
    assert too_long == {}


# The libraries the shell stands on: their public APIs only, so that an upgrade within the lock
# file's versions cannot break the app through a renamed private.
APP = ROOT / "app"
FRAMEWORKS = {"fastapi", "starlette", "sqlalchemy", "pydantic", "pydantic_core", "psycopg"}


# Underscore names Python documents as public: os._exit.
DOCUMENTED = {"_exit"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _names_defined_in_app() -> set[str]:
    """Every name the app defines itself (functions, classes, attributes, variables,
    parameters): a ``x._name`` with one of these is the app's own."""
    names: set[str] = set()
    for path in APP.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return names


def test_the_app_uses_no_private_name_of_its_frameworks():
    """No module of app/ imports an underscore module or name of FastAPI, Starlette,
    SQLAlchemy, pydantic or psycopg, nor reads an underscore attribute the app does not define
    itself (a framework object's private table, a private exception class)."""
    own = _names_defined_in_app() | DOCUMENTED
    found = []
    for path in APP.rglob("*.py"):
        # The torch demo (never imported by the server) may use torch's own: torch is pinned.
        demo = path.is_relative_to(APP / "zero_demo")
        where = path.relative_to(APP.parent)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                if parts[0] in FRAMEWORKS and (
                    any(_is_private(p) for p in parts)
                    or any(_is_private(alias.name) for alias in node.names)
                ):
                    found.append(f"{where}:{node.lineno} from {node.module} import ...")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] in FRAMEWORKS and any(_is_private(p) for p in parts):
                        found.append(f"{where}:{node.lineno} import {alias.name}")
            elif (
                isinstance(node, ast.Attribute)
                and not demo
                and _is_private(node.attr)
                and node.attr not in own
            ):
                found.append(f"{where}:{node.lineno} .{node.attr}")
    assert found == []
