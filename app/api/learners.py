"""Learner identity for apps: issue, inspect and revoke bearer tokens."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from app.deps import ApiLearner, BearerToken, SessionDep
from app.schemas import ErrorPublic, LearnerCreatedPublic, LearnerPublic
from app.services.errors import Unauthorized
from app.services.learners import create_app_learner, revoke_token

router = APIRouter(tags=["learners"])


@router.post("/learners", response_model=LearnerCreatedPublic, status_code=status.HTTP_201_CREATED)
def create_learner(session: SessionDep) -> LearnerCreatedPublic:
    """Create a learner and its bearer token (shown once; keep it in the app's secure storage)."""
    learner, token = create_app_learner(session=session)
    return LearnerCreatedPublic(learner_id=learner.id, token=token)


@router.get("/me", response_model=LearnerPublic, responses={401: {"model": ErrorPublic}})
def read_me(learner: ApiLearner) -> LearnerPublic:
    """Who the current learner is."""
    return LearnerPublic(learner_id=learner.id, kind=learner.kind)


@router.delete(
    "/me/token", status_code=status.HTTP_204_NO_CONTENT, responses={401: {"model": ErrorPublic}}
)
def revoke_my_token(session: SessionDep, token: BearerToken) -> Response:
    """Revoke the bearer token of this request (sign out the app)."""
    if not revoke_token(session=session, token=token):
        raise Unauthorized("unknown or revoked learner token")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
