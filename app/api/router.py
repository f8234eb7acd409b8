"""The /api/v1 routers, registered flat on the app by ``create_app`` (see app.routing)."""

from __future__ import annotations

from app.api import (
    answers,
    auth,
    cards,
    exports,
    instructor,
    me,
    my_account,
    sessions,
    sync,
    today,
)
from app.api.analytics import router as analytics_router
from app.api.calculator import router as calculator_router

API_PREFIX = "/api/v1"
# Served ahead of every other route, each documented by a path operation of the routers below
# (app.routing.HotRoute).
HOT_ROUTES = tuple(
    route.with_prefix(API_PREFIX) for route in (*cards.HOT_ROUTES, *answers.HOT_ROUTES)
)
# After the hot routes, a request is matched against these routers' routes in this order.
API_ROUTERS = (
    cards.router,
    answers.router,
    auth.router,
    me.router,
    sync.router,
    sessions.router,
    today.router,
    calculator_router,
    instructor.router,
    exports.router,
    analytics_router,
    my_account.router,
)
