"""Property-based conformance: every operation, fed generated and malformed input, answers as its
OpenAPI description says (status codes, bodies, headers) and never with a 500."""

import atexit
import shutil
import tempfile
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from app.cli import migrate
from app.main import create_app
from tests.conftest import make_settings

# schemathesis builds its tests at import time, so this module makes its own migrated database.
_folder = Path(tempfile.mkdtemp(prefix="infracards-schema-"))
atexit.register(shutil.rmtree, _folder, ignore_errors=True)
_url = f"sqlite:///{_folder / 'infracards.db'}"
migrate(_url)
schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(make_settings(_folder, _url)))


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_every_operation_answers_as_documented(case):
    # Generated "valid" bodies carry random question tokens, which the server rightly refuses.
    case.call_and_validate(excluded_checks=[positive_data_acceptance])
