"""Authoring: what instructors make from the cards. Drafts, publication and history
(:mod:`app.authoring.service`), previews (:mod:`app.authoring.preview`), authored formulas checked
in worker processes (:mod:`app.authoring.sandbox`), exports (:mod:`app.authoring.exports`)."""
