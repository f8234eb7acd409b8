"""Every page router, registered flat on the app by ``create_app`` (see app.routing); pages are
not in the OpenAPI document."""

from __future__ import annotations

from app.web import account, feedback, my_data, pages, password_reset, practice, review, today
from app.web import sessions as session_pages
from app.web.analytics import router as analytics_router
from app.web.authoring import card_form as authoring_card_form
from app.web.authoring import cards as authoring_cards
from app.web.authoring import editor as authoring_editor
from app.web.authoring import exports as authoring_exports
from app.web.authoring import imports as authoring_imports
from app.web.authoring import point_form as authoring_point_form
from app.web.authoring import removals as authoring_removals
from app.web.calculator import router as calculator_router
from app.web.classes import router as classes_router

# The practice loop's pages (a question, the answer form, the feedback) are registered ahead of
# the API's routes: Starlette tries the routes in order, and the loop's came after some 75 others
# (tests/test_routing.py checks that no route is shadowed by one registered before it).
LOOP_PAGE_ROUTERS = (practice.router, feedback.router)
PAGE_ROUTERS = (
    today.router,
    pages.router,
    *LOOP_PAGE_ROUTERS,
    session_pages.router,
    review.router,
    account.router,
    authoring_cards.router,
    authoring_card_form.router,
    authoring_point_form.router,
    authoring_editor.router,
    authoring_removals.router,
    authoring_exports.router,
    authoring_imports.router,
    calculator_router,
    analytics_router,
    classes_router,
    password_reset.router,
    my_data.router,
)
