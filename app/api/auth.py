"""Accounts and devices: register, get a token per device, list and revoke tokens."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response, status

from app.auth.service import (
    authenticate,
    create_app_learner,
    issue_token,
    list_tokens,
    register,
    revoke_token,
)
from app.deps import ApiLearner, DbDep, LimiterDep
from app.schemas import (
    AccountPublic,
    DeviceTokenPublic,
    LearnerCreatedPublic,
    LearnerPublic,
    ProblemPublic,
    RegisterCreate,
    TokenCreate,
    TokenPublic,
)

router = APIRouter(tags=["accounts"])
PROBLEMS: dict[int | str, dict[str, object]] = {
    400: {"model": ProblemPublic, "description": "An invalid email or a weak password."},
    409: {"model": ProblemPublic},
}
LOGIN_PROBLEMS: dict[int | str, dict[str, object]] = {
    401: {"model": ProblemPublic, "description": "wrong_credentials: no such email and password."},
    429: {
        "model": ProblemPublic,
        "description": "Too many failed logins for this account or address: wait Retry-After "
        "seconds.",
    },
}
NO_SUCH_TOKEN: dict[int | str, dict[str, object]] = {
    404: {"model": ProblemPublic, "description": "No such device token of the learner."},
}


@router.post(
    "/auth/register",
    response_model=AccountPublic,
    status_code=status.HTTP_201_CREATED,
    responses=PROBLEMS,
)
def register_account(body: RegisterCreate, db: DbDep) -> AccountPublic:
    """Create an account (email + password); then get a token with ``POST /auth/token``."""
    learner = register(db=db, email=body.email, password=body.password)
    assert learner.email is not None
    return AccountPublic(learner_id=learner.id, email=learner.email, role=learner.role)


@router.post("/auth/token", response_model=TokenPublic, responses=LOGIN_PROBLEMS)
def create_token(
    body: TokenCreate, request: Request, db: DbDep, limiter: LimiterDep
) -> TokenPublic:
    """A bearer token for one device of an account (rate-limited per account and address)."""
    learner = authenticate(
        db=db,
        limiter=limiter,
        email=body.email,
        password=body.password,
        address=request.client.host if request.client else "unknown",
    )
    token = issue_token(db=db, learner_id=learner.id, device_name=body.device_name)
    return TokenPublic(access_token=token)


@router.post("/learners", response_model=LearnerCreatedPublic, status_code=status.HTTP_201_CREATED)
def create_learner(db: DbDep) -> LearnerCreatedPublic:
    """An anonymous app install and its bearer token (shown once; keep it in secure storage)."""
    learner, token = create_app_learner(db=db)
    return LearnerCreatedPublic(learner_id=learner.id, access_token=token)


@router.get("/me", response_model=LearnerPublic)
def read_me(learner: ApiLearner) -> LearnerPublic:
    """Who the token belongs to."""
    return LearnerPublic(
        learner_id=learner.id,
        kind=learner.kind,
        role=learner.role,
        email=learner.email,
        time_zone=learner.time_zone,
    )


@router.get("/me/tokens", response_model=list[DeviceTokenPublic])
def read_my_tokens(db: DbDep, learner: ApiLearner) -> list[DeviceTokenPublic]:
    """The learner's devices (tokens not revoked)."""
    return [
        DeviceTokenPublic(
            id=t.id,
            device_name=t.device_name,
            created_at=t.created_at,
            last_used_at=t.last_used_at,
            current=t.id == learner.token_id,
        )
        for t in list_tokens(db=db, learner_id=learner.id)
    ]


@router.delete(
    "/me/tokens/{token_id}", status_code=status.HTTP_204_NO_CONTENT, responses=NO_SUCH_TOKEN
)
def revoke_my_token(
    token_id: Annotated[int, Path(ge=1, le=2**62)], db: DbDep, learner: ApiLearner
) -> Response:
    """Sign one device out."""
    revoke_token(db=db, learner_id=learner.id, token_id=token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete("/me/token", status_code=status.HTTP_204_NO_CONTENT, responses=NO_SUCH_TOKEN)
def revoke_this_token(db: DbDep, learner: ApiLearner) -> Response:
    """Sign out the device of this request."""
    assert learner.token_id is not None
    revoke_token(db=db, learner_id=learner.id, token_id=learner.token_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
