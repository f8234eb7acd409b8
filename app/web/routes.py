"""Every page route, in one router for ``create_app``."""

from __future__ import annotations

from fastapi import APIRouter

from app.web import account, authoring, pages, practice, review
from app.web.analytics import router as analytics_router
from app.web.calculator import router as calculator_router

router = APIRouter(include_in_schema=False)
router.include_router(pages.router)
router.include_router(practice.router)
router.include_router(review.router)
router.include_router(account.router)
router.include_router(authoring.router)
router.include_router(calculator_router)
router.include_router(analytics_router)
