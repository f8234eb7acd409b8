"""Every page route, in one router for ``create_app``."""

from __future__ import annotations

from fastapi import APIRouter

from app.web import account, pages, practice, review

router = APIRouter(include_in_schema=False)
router.include_router(pages.router)
router.include_router(practice.router)
router.include_router(review.router)
router.include_router(account.router)
