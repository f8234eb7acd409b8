"""Which parameter combinations validation and the giveaway statistics look at."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from fractions import Fraction

from .cards import Template
from .generation import draw_params, seeded

SAMPLED_SEEDS = 500


def parameter_combinations(template: Template) -> Iterator[dict[str, Fraction]]:
    """The whole domain (the combinations the constraints allow), or :data:`SAMPLED_SEEDS`
    seeded draws when it is larger; derived parameters computed."""
    if template.domain_size() <= SAMPLED_SEEDS:
        names = list(template.params)
        combos = (
            template.allowed
            if template.allowed is not None
            else itertools.product(*(template.params[n].values for n in names))
        )
        for combo in combos:
            yield template.complete(dict(zip(names, combo, strict=True)))
        return
    for seed in range(SAMPLED_SEEDS):
        yield draw_params(template, seeded(f"validate:{template.id}:{seed}", template.generator))
