"""An account's password changed or reset by email, and the learner's own data: export it, delete
it all."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.api.problem_schemas import ProblemPublic
from app.auth.learner_data import delete_learner, export_filename, export_learner_data
from app.auth.resets import ask_for_reset, reset_password
from app.auth.service import change_password, confirm_password
from app.deps import ApiLang, ApiLearner, ContextDep, DbDep, LimiterDep, SettingsDep
from app.schemas import AccountDeletion, PasswordResetConfirm, PasswordResetCreate

router = APIRouter(tags=["accounts"])


class PasswordChange(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"current_password": "orbit-lamp-42", "new_password": "orbit-lamp-43"}]
        }
    )

    current_password: str = Field(max_length=1024, description="The account's password now.")
    new_password: str = Field(min_length=1, max_length=1024, description="The new password.")


@router.post(
    "/auth/password-reset",
    status_code=status.HTTP_202_ACCEPTED,
    response_class=Response,  # no body
    responses={
        202: {"description": "Accepted, whether or not the address has an account."},
        400: {"model": ProblemPublic, "description": "Not an email address."},
        429: {"model": ProblemPublic, "description": "Too many requests for this address."},
    },
)
def ask_password_reset(
    body: PasswordResetCreate,
    request: Request,
    settings: SettingsDep,
    limiter: LimiterDep,
    lang: ApiLang,
) -> Response:
    """Email a link to choose a new password, if the address has an account (the answer is the
    same either way). The link opens the web page ``/password-reset/<token>``; an app may take
    the token from it and call ``POST /auth/password-reset/confirm``. It works once, within an
    hour. Rate-limited per address and per client."""
    ask_for_reset(
        limiter=limiter,
        mailer=request.app.state.mailer,
        sessions=request.app.state.sessionmaker,
        email=body.email,
        address=request.client.host if request.client else "unknown",
        lang=lang,
        base_url=settings.public_url or str(request.base_url),
    )
    return Response(status_code=status.HTTP_202_ACCEPTED)


@router.post(
    "/auth/password-reset/confirm",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        400: {
            "model": ProblemPublic,
            "description": "A weak password, or a link expired or used (invalid_reset_link).",
        }
    },
)
def confirm_password_reset(body: PasswordResetConfirm, db: DbDep) -> Response:
    """Set a new password with an emailed link's token; every web session and device token of
    the account is signed out (log in again with ``POST /auth/token``)."""
    reset_password(db=db, token=body.token, new=body.password)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/me/password",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        400: {
            "model": ProblemPublic,
            "description": "weak_password, invalid_password: the new password is not one to use.",
        },
        401: {
            "model": ProblemPublic,
            "description": "No valid token, or wrong_credentials: the current password is not "
            "right (an anonymous install has none).",
        },
        429: {"model": ProblemPublic, "description": "Too many wrong passwords: Retry-After."},
    },
)
def change_my_password(
    body: PasswordChange, request: Request, db: DbDep, learner: ApiLearner, limiter: LimiterDep
) -> Response:
    """Set a new password, the current one confirmed (throttled as logins are). This device's
    token goes on working; every other device token and web session of the account is signed
    out (they log in again with the new password)."""
    change_password(
        db=db,
        limiter=limiter,
        learner=learner,
        current=body.current_password,
        new=body.new_password,
        address=request.client.host if request.client else "unknown",
        keep_token_id=learner.token_id,
    )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/me/export",
    response_class=JSONResponse,
    responses={
        200: {
            "description": "Everything stored about the learner (a download).",
            "content": {"application/json": {"schema": {"type": "object"}}},
            "headers": {
                "Content-Disposition": {
                    "description": "attachment, with the file name to save it under.",
                    "required": True,
                    "schema": {"type": "string"},
                }
            },
        },
        401: {"model": ProblemPublic},
    },
)
def export_my_data(db: DbDep, ctx: ContextDep, learner: ApiLearner) -> Response:
    """The learner's profile (no password hash), attempts, mistakes, reviews with their ratings,
    sessions, devices and classes, as one JSON document with a file name to save it under (the
    answers of an exam still running come once it ends)."""
    document = export_learner_data(db=db, learner_id=learner.id, now=ctx.clock())
    disposition = f'attachment; filename="{export_filename(document)}"'
    return JSONResponse(document, headers={"Content-Disposition": disposition})


@router.delete(
    "/me",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        401: {
            "model": ProblemPublic,
            "description": "No valid token, or an account's password missing or not right.",
        },
        429: {"model": ProblemPublic, "description": "Too many wrong passwords: Retry-After."},
    },
)
def delete_me(
    request: Request,
    db: DbDep,
    learner: ApiLearner,
    limiter: LimiterDep,
    body: AccountDeletion | None = None,
) -> Response:
    """Delete the learner and all their data (attempts, reviews, sessions, classes joined); every
    device token and web session stops working. It cannot be undone. An account confirms with
    its password in the body (``{"password": ...}``; throttled as logins are); an anonymous
    install's learner has none to give."""
    if learner.has_account:
        confirm_password(
            db=db,
            limiter=limiter,
            learner=learner,
            password=body.password if body is not None else "",
            address=request.client.host if request.client else "unknown",
        )
    delete_learner(db=db, learner_id=learner.id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
