"""The /api/v1 routers, registered flat on the app by ``create_app`` (see app.routing)."""

from __future__ import annotations

from app.api import answers, auth, cards, exports, instructor, me
from app.api.analytics import router as analytics_router
from app.api.calculator import router as calculator_router

API_PREFIX = "/api/v1"
# The hot routes first: a request is matched against the routes in this order.
API_ROUTERS = (
    cards.router,
    answers.router,
    auth.router,
    me.router,
    calculator_router,
    instructor.router,
    exports.router,
    analytics_router,
)
