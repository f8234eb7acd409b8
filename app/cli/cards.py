"""``check-cards``, ``export-card`` and ``export-questions``: the cards, checked and exported."""

from __future__ import annotations

from pathlib import Path

from app.cli.errors import CliError, database_error
from app.domain.numerals import is_digits


def check_cards(cards_dir: Path, report: bool = False, records: Path | None = None) -> str:
    """Load and validate every card whole; a summary, or CliError with the card's message.

    ``report``: also each template's content-blind guesser shares (app.domain.giveaways).
    ``records``: the folder where the cards that pass are recorded, so that the server's
    start-up does not validate them again (app.catalog.validated).
    """
    from app.catalog.validated import ValidatedCards
    from app.domain.cards import CardError
    from app.domain.catalog import load_cards

    try:
        cards = load_cards(
            cards_dir, None if records is None else ValidatedCards(records, reuse=False)
        )
    except CardError as exc:
        raise CliError(str(exc)) from None
    lines = []
    for card in cards.values():
        templates = card.templates()
        pitfalls = sum(len(t.pitfalls) for t in templates)
        lines.append(
            f"{card.id} v{card.version}: {len(card.points)} exam points, "
            f"{len(templates)} templates, {pitfalls} pitfalls, {len(card.formulas)} formulas"
        )
        if report:
            from app.domain.giveaways import report_lines

            lines += report_lines(card)
    lines.append(f"ok: {len(cards)} card{'s' if len(cards) != 1 else ''} in {cards_dir}")
    return "\n".join(lines)


def export_questions(
    cards_dir: Path,
    card_id: str,
    fmt: str,
    out: Path,
    lang: str,
    variants: str,
    numeric: str = "fixed",
) -> str:
    """Write one card's fixed variants as an Anki package, Moodle XML (numeric templates as
    calculated questions where Moodle can compute them: ``numeric="calculated"``) or a QTI
    package; a one-line summary.

    The arguments are checked before any card is read; only the exported card is validated
    over its domains (the others in the folder are read, so an unknown id lists them)."""
    from app.domain.cards import CardError, read_cards
    from app.domain.export_plan import ExportError, check_variants
    from app.domain.languages import LANGS
    from app.domain.validation import validate_card

    if lang not in LANGS:
        raise CliError(f"unknown language {lang!r} (known: {', '.join(LANGS)})")
    if not is_digits(variants):
        raise CliError(f"--variants must be a whole number, got {variants!r}")
    try:
        check_variants(int(variants))
    except ExportError as exc:
        raise CliError(str(exc)) from None
    try:
        from app.authoring.exports import check_export_request, export_card
    except ModuleNotFoundError as exc:
        raise CliError(f"exports need the package {exc.name!r} (pip install genanki)") from None
    try:
        check_export_request(fmt, numeric)
    except ExportError as exc:
        raise CliError(str(exc)) from None
    if not out.parent.is_dir():
        raise CliError(f"cannot write {str(out)!r}: its folder does not exist")
    try:
        cards = read_cards(cards_dir)
        card = cards.get(card_id)
        if card is None:
            raise CliError(f"unknown card {card_id!r} (known: {', '.join(sorted(cards))})")
        validate_card(card)
    except CardError as exc:
        raise CliError(str(exc)) from None
    try:
        export = export_card(
            card, fmt, "zh" if lang == "zh" else "en", int(variants), numeric=numeric
        )
    except ExportError as exc:
        raise CliError(str(exc)) from None
    except ModuleNotFoundError as exc:
        raise CliError(f"exports need the package {exc.name!r} (pip install genanki)") from None
    try:
        out.write_bytes(export.content)
    except OSError as exc:
        raise CliError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
    kind = ", calculated" if numeric == "calculated" else ""
    size = len(export.content)
    return f"wrote {out} ({fmt}{kind}, {lang}, {card.id} v{card.version}, {size} bytes)"


def export_card(database_url: str, card_id: str, out: Path | None) -> str:
    """The latest published version of a card, from the database, as card-file YAML."""
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from app.db import make_engine, make_sessionmaker
    from app.domain.cards import card_to_yaml
    from app.models import CardVersion

    engine = make_engine(database_url)
    try:
        with make_sessionmaker(engine)() as db:
            document = db.scalars(
                select(CardVersion.document)
                .where(CardVersion.card_id == card_id)
                .order_by(CardVersion.version.desc())
                .limit(1)
            ).first()
    except SQLAlchemyError as exc:
        raise database_error("cannot read the card", exc) from None
    finally:
        engine.dispose()
    if document is None:
        raise CliError(f"no published card {card_id!r} in the database")
    text = card_to_yaml(document)
    if out is None:
        return text.rstrip("\n")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror}") from None
    return f"wrote {card_id} version {document.get('version')} to {out}"
