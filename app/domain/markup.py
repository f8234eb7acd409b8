"""What a card's texts may hold besides words: inline maths (``$...$``) in the LaTeX the pages
render, and no HTML.

Pages render ``$...$`` as MathML on the server (:mod:`app.rendering`, latex2mathml) and escape
everything else, so HTML or an unknown command only shows as source there; but the exports
(Anki, Moodle, QTI) hand the texts to MathJax and to HTML readers, where ``\\href``,
``\\unicode`` or a ``<script>`` act. A card is therefore refused when a text of it

- holds something that reads as HTML markup: ``<`` followed by a letter, ``/``, ``!`` or ``?``
  (``<b>``, ``</a``, ``<!--``); a comparison is written ``a < b`` or ``\\lt`` in maths;
- uses a LaTeX command outside :data:`LATEX_COMMANDS`: the commands the shipped cards use and
  the usual ones of arithmetic, each rendered by the pages' converter (a test checks every one),
  none that links, loads, styles or defines (``\\href``, ``\\url``, ``\\unicode``, ``\\html...``,
  ``\\class``, ``\\style``, ``\\cssId``, ``\\require``, ``\\def``, ``\\newcommand``, ``\\input``).

Every string of the card document is read (texts, formula LaTeX, sources): formulas, ids and
units cannot hold ``<`` or ``\\`` anyway. :func:`strip_markup` is the exports' second line, for
a card stored before this check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .cards import CardError
from .messages import Message
from .texts import Text

_GREEK = """alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu
    nu xi pi varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta
    Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega"""
_SYMBOLS = """cdot times div pm mp ast star circ bullet le leq ge geq ne neq lt gt approx sim simeq
    equiv propto ll gg to rightarrow leftarrow Rightarrow Leftarrow leftrightarrow mapsto infty
    partial nabla top perp mid parallel ldots cdots dots vdots in notin subset subseteq cup cap
    forall exists neg land lor sum prod int"""
_FUNCTIONS = "log ln exp min max sin cos tan sup inf lim det gcd bmod"
_DELIMITERS = """left right lceil rceil lfloor rfloor langle rangle lvert rvert vert Vert lVert
    rVert big Big bigl bigr Bigl Bigr"""
_STRUCTURES = """frac dfrac tfrac sqrt binom overline underline hat bar tilde vec dot ddot widehat
    widetilde overbrace underbrace overset underset stackrel"""
_FONTS = """mathrm mathbf mathit mathsf mathtt mathcal mathbb text textrm textbf textit
    operatorname boldsymbol"""
_SPACES = "quad qquad"
# The LaTeX commands a card's texts may use: named ones (``\\frac``) and one-character ones
# (``\\,`` thin space, ``\\{`` brace, ``\\$`` a dollar sign in prose).
LATEX_COMMANDS: frozenset[str] = frozenset(
    " ".join((_GREEK, _SYMBOLS, _FUNCTIONS, _DELIMITERS, _STRUCTURES, _FONTS, _SPACES)).split()
) | frozenset(",;:!{}%_$&#|")
# Commands that link, load, restyle or define (MathJax acts on them): named in their refusal.
ACTIVE_COMMANDS: frozenset[str] = frozenset(
    """href url unicode class style cssId require def edef gdef xdef let newcommand
    renewcommand providecommand DeclareMathOperator newenvironment input include write
    immediate catcode csname html htmlClass htmlStyle htmlId htmlData htmlAttr mmlToken
    color textcolor colorbox includegraphics""".split()
)

_HTML = re.compile(r"<(?:[A-Za-z]|/|!|\?)")
_TAG_NAME = re.compile(r"<[/!?]?[A-Za-z0-9-]*")
_COMMAND = re.compile(r"\\(?:([A-Za-z]+)|(.)|$)", re.DOTALL)


def html_markup(text: str) -> str | None:
    """The first thing in ``text`` that reads as HTML markup, up to its name (``<b``,
    ``</script``, ``<!--``, ``<?xml``), or None."""
    found = _HTML.search(text)
    if found is None:
        return None
    name = _TAG_NAME.match(text, found.start())
    assert name is not None  # _HTML matched there
    return name.group(0)


def latex_commands(text: str) -> Iterator[str]:
    """Every backslash command of ``text`` (``\\frac``, ``\\,``, a lone ``\\``), in order."""
    for match in _COMMAND.finditer(text):
        yield "\\" + (match.group(1) or match.group(2) or "")


def refused_command(text: str) -> str | None:
    """The first LaTeX command of ``text`` outside :data:`LATEX_COMMANDS`, or None."""
    for command in latex_commands(text):
        if command[1:] not in LATEX_COMMANDS:
            return command
    return None


def markup_problem(text: str) -> Text | None:
    """Why ``text`` cannot be a card's text (HTML markup, a LaTeX command the pages do not
    render), or None."""
    markup = html_markup(text)
    if markup is not None:
        return Message(
            "it holds HTML markup (%(markup)s): a card's texts are plain text with $...$ maths; "
            "put a space after a less-than sign, or write \\lt in maths",
            markup=repr(markup),
        )
    command = refused_command(text)
    if command is None:
        return None
    if command[1:] in ACTIVE_COMMANDS:
        return Message(
            "the LaTeX command %(command)s is not allowed: it links, loads, styles or defines "
            "something, and an export's MathJax would act on it",
            command=command,
        )
    return Message(
        "the LaTeX command %(command)s is not one the pages render (maths may use fractions, "
        "roots, Greek letters, operators, relations, delimiters and \\mathrm-like fonts)",
        command=command,
    )


def markup_problems(document: Mapping[str, Any]) -> list[CardError]:
    """A problem for each string of a card document that :func:`markup_problem` refuses,
    located: a template's with its id and its field as the editor names it
    (``stem.en``, ``solution.1.zh``, ``pitfalls.<id>.explanation.en``), the card's with its
    field (``definition.en``, ``points.0.title.zh``)."""
    found: list[CardError] = []
    card = Message("card %(card)s", card=repr(document.get("id")))
    for path, text in _strings(document, ()):
        reason = markup_problem(text)
        if reason is None:
            continue
        template_id, field = _located(document, path)
        where: Text = card
        if template_id is not None:
            where = Message(
                "%(where)s, template %(template)s", where=card, template=repr(template_id)
            )
        found.append(
            CardError(
                Message("%(where)s, %(what)s: %(error)s", where=where, what=field, error=reason),
                template_id=template_id,
                field=field,
                reason=reason,
            )
        )
    return found


def check_markup(document: Mapping[str, Any]) -> None:
    """Refuse (CardError) a card document with a text :func:`markup_problem` refuses."""
    problems = markup_problems(document)
    if problems:
        raise problems[0]


def _strings(value: object, path: tuple[object, ...]) -> Iterator[tuple[tuple[object, ...], str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, Sequence):
        for index, item in enumerate(value):
            yield from _strings(item, (*path, index))


def _located(document: Mapping[str, Any], path: tuple[object, ...]) -> tuple[str | None, str]:
    """The template id (None: the card's) and the field of the string at ``path``."""
    if len(path) > 4 and path[0] == "points" and path[2] == "templates":
        template = document["points"][path[1]]["templates"][path[3]]
        rest = list(path[4:])
        if rest[0] == "solution" and isinstance(rest[1], int):
            rest[1] += 1  # solution steps are numbered from 1, as compilation names them
        elif rest[0] == "pitfalls" and isinstance(rest[1], int):
            rest[1] = template["pitfalls"][rest[1]].get("id", rest[1])
        return str(template.get("id")), ".".join(str(part) for part in rest)
    return None, ".".join(str(part) for part in path)


# --- the exports' second line -----------------------------------------------------------------


def strip_markup(text: str) -> str:
    """``text`` without what :func:`markup_problem` refuses, for a card stored before the
    check: a refused command loses its backslash (``\\href{x}{y}`` reads ``href{x}{y}``, which
    MathJax shows as letters) and ``<`` before a letter, ``/``, ``!`` or ``?`` gets a space after
    it (``< script``, which no HTML reader takes for a tag)."""
    text = _HTML.sub(lambda match: "< " + match.group(0)[1:], text)

    def command(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or ""
        if name in LATEX_COMMANDS:
            return match.group(0)
        return "" if name == "\\" else name  # a backslash kept would start a command again

    return _COMMAND.sub(command, text)
