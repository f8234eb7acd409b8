"""The engine stays plain Python, and the web server never imports torch."""

import ast
import subprocess
import sys
from pathlib import Path

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
}


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
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
