"""Accounts and devices: register, get a token per device, list and revoke tokens."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response, status

from app.api.problem_schemas import ProblemPublic
from app.auth.service import (
    admit_new_learner,
    authenticate,
    create_app_learner,
    issue_token,
    learner_for_token,
    list_tokens,
    merge_learner,
    revoke_token,
)
from app.auth.signup import sign_up
from app.deps import (
    OPTIONAL_BEARER,
    ApiLang,
    ApiLearner,
    DbDep,
    LimiterDep,
    SettingsDep,
    bearer_credentials,
)
from app.schemas import (
    DeviceTokenPublic,
    LearnerCreatedPublic,
    LearnerPublic,
    RegisterCreate,
    RegistrationPublic,
    TokenCreate,
    TokenPublic,
)

router = APIRouter(tags=["accounts"])
PROBLEMS: dict[int | str, dict[str, object]] = {
    400: {"model": ProblemPublic, "description": "An invalid email or a weak password."},
}
LOGIN_PROBLEMS: dict[int | str, dict[str, object]] = {
    401: {"model": ProblemPublic, "description": "wrong_credentials: no such email and password."},
    429: {
        "model": ProblemPublic,
        "description": "Too many failed logins for this account or address: wait Retry-After "
        "seconds.",
    },
}
NEW_LEARNER_LIMITED: dict[int | str, dict[str, object]] = {
    429: {
        "model": ProblemPublic,
        "description": "Too many new learners from this address, or from everyone together: "
        "wait Retry-After seconds.",
    },
}
NO_SUCH_TOKEN: dict[int | str, dict[str, object]] = {
    404: {"model": ProblemPublic, "description": "No such device token of the learner."},
}


@router.post(
    "/auth/register",
    response_model=RegistrationPublic,
    status_code=status.HTTP_201_CREATED,
    responses={
        201: {"description": "The same answer whether or not the address had an account."},
        400: PROBLEMS[400],
        **NEW_LEARNER_LIMITED,
    },
)
def register_account(
    body: RegisterCreate,
    request: Request,
    db: DbDep,
    settings: SettingsDep,
    limiter: LimiterDep,
    lang: ApiLang,
) -> RegistrationPublic:
    """Create an account (email + password); then get a token with ``POST /auth/token``.

    The answer never tells whether the address already had an account: if it had, nothing is
    created or changed, and its owner is emailed (a link to log in or choose a new password);
    logging in then works only with that account's own password."""
    email = sign_up(
        db=db,
        limiter=limiter,
        mailer=request.app.state.mailer,
        sessions=request.app.state.sessionmaker,
        email=body.email,
        password=body.password,
        lang=lang,
        base_url=settings.public_url or str(request.base_url),
        address=request.client.host if request.client else "unknown",
    )
    return RegistrationPublic(email=email)


@router.post(
    "/auth/token",
    response_model=TokenPublic,
    responses=LOGIN_PROBLEMS,
    openapi_extra=OPTIONAL_BEARER,
)
def create_token(
    body: TokenCreate, request: Request, db: DbDep, limiter: LimiterDep
) -> TokenPublic:
    """A bearer token for one device of an account (rate-limited per account and address).

    Sent with the ``Authorization: Bearer`` token of an anonymous install (``POST /learners``),
    it carries the install's history (answers, sessions, reviews) into the account, once: the
    install's token then stops working, and ``claimed_history`` says so. A retry of the same
    call, or a token that is unknown or an account's, claims nothing and is otherwise ignored,
    so an app may always send its install's token along."""
    learner = authenticate(
        db=db,
        limiter=limiter,
        email=body.email,
        password=body.password,
        address=request.client.host if request.client else "unknown",
    )
    install = bearer_credentials(request)
    claimed = False
    if install is not None:
        anonymous = learner_for_token(db=db, token=install.credentials)
        if anonymous is not None:
            claimed = merge_learner(db=db, source_id=anonymous.id, target_id=learner.id)
    token = issue_token(db=db, learner_id=learner.id, device_name=body.device_name)
    return TokenPublic(access_token=token, claimed_history=claimed)


@router.post(
    "/learners",
    response_model=LearnerCreatedPublic,
    status_code=status.HTTP_201_CREATED,
    responses=NEW_LEARNER_LIMITED,
)
def create_learner(db: DbDep, request: Request, limiter: LimiterDep) -> LearnerCreatedPublic:
    """An anonymous app install and its bearer token (shown once; keep it in secure storage).
    New learners are limited per client address and in all (429 with Retry-After)."""
    admit_new_learner(limiter, request.client.host if request.client else "unknown")
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
