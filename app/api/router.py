"""The /api/v1 router."""

from __future__ import annotations

from fastapi import APIRouter

from app.api import answers, auth, cards, exports, instructor, me
from app.api.analytics import router as analytics_router
from app.api.calculator import router as calculator_router

api_router = APIRouter(prefix="/api/v1")
api_router.include_router(cards.router)
api_router.include_router(answers.router)
api_router.include_router(auth.router)
api_router.include_router(me.router)
api_router.include_router(calculator_router)
api_router.include_router(instructor.router)
api_router.include_router(exports.router)
api_router.include_router(analytics_router)
