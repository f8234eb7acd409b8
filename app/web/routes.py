"""Every page router, registered flat on the app by ``create_app`` (see app.routing); pages are
not in the OpenAPI document."""

from __future__ import annotations

from app.web import account, authoring, pages, practice, review
from app.web.analytics import router as analytics_router
from app.web.calculator import router as calculator_router

PAGE_ROUTERS = (
    pages.router,
    practice.router,
    review.router,
    account.router,
    authoring.router,
    calculator_router,
    analytics_router,
)
