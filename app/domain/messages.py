"""The product's own texts (pages, refusals, validation and authoring messages) through gettext.

English source strings are the msgids; each language's catalog is
``app/locale/<lang>/LC_MESSAGES/messages.po``, compiled to ``messages.mo`` at build time
(``make catalogs``, i.e. ``pybabel compile -d app/locale``). A :class:`Message` is translated when
it is shown, in the reader's language, so code that holds a bilingual :class:`~.bilingual.Text` can
hold a message instead: both answer ``.get(lang)``. Card content stays in :class:`~.bilingual.Text`
(it is data the cards carry in both languages), never in the catalogs.

Mark texts for ``pybabel extract`` (see ``babel.cfg`` and the Makefile's ``messages`` target) by
writing them as literal first arguments of :class:`Message`, :func:`plural_message` or
:func:`contextual_message`. Named parameters are written ``%(name)s`` and put in after the
translation; a parameter that is itself a text (``Text`` or ``Message``) is shown in the same
language.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from babel.support import NullTranslations, Translations

from .bilingual import Text
from .languages import DEFAULT_LANG, LANGS

LOCALE_DIR = Path(__file__).resolve().parents[1] / "locale"
DOMAIN = "messages"
_LANG_NAME = re.compile(r"^[a-z]{2,3}(_[A-Za-z0-9]{2,8})?$")


class CatalogMissing(RuntimeError):
    """A language has a catalog (``.po``) that was not compiled (no ``.mo``)."""


def catalog_path(lang: str, suffix: str = ".mo") -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


@lru_cache(maxsize=32)
def translations(lang: str) -> NullTranslations:
    """The compiled catalog of ``lang``, loaded once.

    A language without a catalog reads the English source texts (as :class:`Text` does); a
    language whose ``.po`` was not compiled is an error, not a silent fall back to English.
    """
    if not _LANG_NAME.match(lang):
        return NullTranslations()  # not a language name: nothing to look up on disk
    compiled = catalog_path(lang)
    if not compiled.is_file():
        if catalog_path(lang, ".po").is_file():
            raise CatalogMissing(
                f"the {lang!r} message catalog is not compiled: {compiled} is missing. "
                "Run `make catalogs` (pybabel compile -d app/locale)."
            )
        return NullTranslations()
    with compiled.open("rb") as handle:
        return Translations(handle, domain=DOMAIN)


def _preload() -> None:
    """Load the compiled catalogs at import: gettext compiles each catalog's plural rule (with
    ``exec``, once), so it happens here rather than inside the first formula error raised
    while a card or an instructor's formula is checked. A missing catalog is reported on use
    and by :func:`check_catalogs` at start-up."""
    for lang in LANGS:
        if catalog_path(lang).is_file():
            translations(lang)


def check_catalogs(langs: tuple[str, ...]) -> None:
    """Load every language's catalog now (at start-up): raises :class:`CatalogMissing`."""
    for lang in langs:
        if not catalog_path(lang).is_file():
            raise CatalogMissing(
                f"the {lang!r} message catalog is not compiled: {catalog_path(lang)} is missing. "
                "Run `make catalogs` (pybabel compile -d app/locale)."
            )
        translations(lang)


def gettext(lang: str, msgid: str) -> str:
    return str(translations(lang).gettext(msgid))


def ngettext(lang: str, singular: str, plural: str, n: int) -> str:
    return str(translations(lang).ngettext(singular, plural, n))


def pgettext(lang: str, context: str, msgid: str) -> str:
    return str(translations(lang).pgettext(context, msgid))


def npgettext(lang: str, context: str, singular: str, plural: str, n: int) -> str:
    return str(translations(lang).npgettext(context, singular, plural, n))


def shown(value: object, lang: str) -> object:
    """A parameter as it is put into a translated text: texts in ``lang``, the rest as is."""
    if isinstance(value, Text):
        return value.get(lang)
    return value


class Message(Text):
    """A product text from the catalogs, translated when shown (``.get(lang)``).

    A :class:`Text` for every consumer (``.get(lang)``, ``.en``, ``.zh``), so refusals,
    problems and pages take one where they take a bilingual text. ``str()`` is the English
    text (what logs and exception messages carry).
    """

    msgid: str
    plural: str | None
    n: int | None
    context: str | None
    params: Mapping[str, Any]

    def __init__(
        self,
        msgid: str,
        /,
        *,
        plural: str | None = None,
        n: int | None = None,
        context: str | None = None,
        **params: Any,
    ) -> None:
        # Text is a frozen dataclass: set the attributes as its __init__ would.
        object.__setattr__(self, "msgid", msgid)
        object.__setattr__(self, "plural", plural)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "context", context)
        object.__setattr__(self, "params", params)

    @property
    def en(self) -> str:
        return self.get("en")

    @property
    def zh(self) -> str:
        return self.get("zh")

    def get(self, lang: str) -> str:
        if self.plural is not None:
            count = self.n if self.n is not None else 1
            if self.context is not None:
                text = npgettext(lang, self.context, self.msgid, self.plural, count)
            else:
                text = ngettext(lang, self.msgid, self.plural, count)
        elif self.context is not None:
            text = pgettext(lang, self.context, self.msgid)
        else:
            text = gettext(lang, self.msgid)
        if not self.params and self.plural is None:
            return text
        values = {name: shown(value, lang) for name, value in self.params.items()}
        if self.plural is not None:
            values.setdefault("num", self.n)
        return text % values

    def __str__(self) -> str:
        return self.get(DEFAULT_LANG)

    def __repr__(self) -> str:
        params = "".join(f", {k}={v!r}" for k, v in self.params.items())
        return f"Message({self.msgid!r}{params})"

    def _key(self) -> tuple[object, ...]:
        return (self.msgid, self.plural, self.n, self.context, tuple(sorted(self.params.items())))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Message):
            return self._key() == other._key()
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.msgid, self.plural, self.n, self.context))


def plural_message(singular: str, plural: str, n: int, /, **params: Any) -> Message:
    """A message whose form depends on the count ``n`` (``%(num)s`` in the texts, as in the
    templates' ``ngettext``)."""
    return Message(singular, plural=plural, n=n, **params)


def contextual_message(context: str, msgid: str, /, **params: Any) -> Message:
    """A message whose English text is shared by meanings translated apart (``pgettext``)."""
    return Message(msgid, context=context, **params)


_preload()
