"""The card's formulas: the one place where the demo reads ``cards/zero-memory-offload.yaml``.

The formulas are not retyped here. They are loaded by the project's card loader and evaluated,
exactly (as fractions), by its formula engine (``app.domain``, pure Python, no torch); this module
only knows their ids and which terms each stage divides by N_d:

- totals per rank: ``ddp`` 16Ψ, ``zero1`` 2Ψ + 2Ψ + 12Ψ/N_d, ``zero2`` 2Ψ + (2Ψ + 12Ψ)/N_d,
  ``zero3`` 16Ψ/N_d; on the GPU under ZeRO-3 + offload, ``offload_gpu`` 2Ψ/N_d;
- terms: ``params_fp16`` 2Ψ, ``grads_fp16`` 2Ψ, ``optimizer_fp32`` 12Ψ;
- communication per rank per step, in elements: ``comm_ddp`` 2Ψ, ``comm_zero12`` 2Ψ,
  ``comm_zero3`` 3Ψ.

The card counts 2-byte (fp16/bf16) parameters and gradients. In fp32 mode the demo's parameters
and gradients take 4 bytes, so their terms are scaled by 4/2; the optimizer term is fp32 anyway.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

STAGE_TOTAL = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}
STAGE_COMM = {0: "comm_ddp", 1: "comm_zero12", 2: "comm_zero12", 3: "comm_zero3"}
TERM_FORMULA = {"params": "params_fp16", "grads": "grads_fp16", "optimizer": "optimizer_fp32"}
SHARDED_TERMS = {
    0: (),
    1: ("optimizer",),
    2: ("optimizer", "grads"),
    3: ("optimizer", "grads", "params"),
}
OFFLOADED_TERMS = {
    0: ("optimizer",),
    1: ("optimizer",),
    2: ("optimizer", "grads"),
    3: ("optimizer", "grads"),
}
CARD_ELEMENT_BYTES = 2  # the card's parameters and gradients are fp16: 2 bytes per element


class CardFormulaError(Exception):
    """The card cannot be read, or lacks a formula the demo needs."""


class CardFormulas:
    """The card's named formulas, evaluated for the demo's Ψ and N_d."""

    def __init__(self, path: str | Path) -> None:
        from app.domain.cards import CardError, read_card

        self.path = Path(path)
        try:
            # The web app validates every card at start-up; the demo only needs the formulas.
            self.formulas = read_card(self.path).formulas
        except CardError as exc:
            raise CardFormulaError(str(exc)) from None
        needed = {
            *STAGE_TOTAL.values(),
            *STAGE_COMM.values(),
            *TERM_FORMULA.values(),
            "offload_gpu",
        }
        missing = sorted(needed - set(self.formulas))
        if missing:
            raise CardFormulaError(f"{self.path.name} has no formula {', '.join(missing)}")

    def value(self, formula_id: str, psi: int, n_d: int) -> Fraction:
        return self.formulas[formula_id].evaluate({"psi": psi, "n_d": n_d})

    def text(self, formula_id: str) -> str:
        """The formula as the card writes it, in plain text: ``2*psi + 12*psi/n_d`` -> ``2Ψ + 12Ψ/N_d``."""
        expr = self.formulas[formula_id].expr_text
        return expr.replace("*psi", "Ψ").replace("psi", "Ψ").replace("n_d", "N_d")

    def card_formula_bytes(self, stage: int, psi: int, n_d: int) -> Fraction:
        """The card's total per rank for ``stage`` (2-byte parameters and gradients)."""
        return self.value(STAGE_TOTAL[stage], psi, n_d)

    def term_bytes(
        self, stage: int, psi: int, n_d: int, element_bytes: int = 2
    ) -> dict[str, Fraction]:
        """Bytes per rank of each term under ``stage``, for parameters and gradients of
        ``element_bytes`` each: the card's term formulas, divided by N_d where the stage shards."""
        scale = Fraction(element_bytes, CARD_ELEMENT_BYTES)
        terms = {}
        for term, formula_id in TERM_FORMULA.items():
            value = self.value(formula_id, psi, n_d)
            if term != "optimizer":
                value *= scale
            if term in SHARDED_TERMS[stage]:
                value /= n_d
            terms[term] = value
        return terms

    def resident_bytes(
        self, stage: int, psi: int, n_d: int, offload: str, element_bytes: int = 2
    ) -> Fraction:
        """What stays on the training device: everything, or without the offloaded terms."""
        terms = self.term_bytes(stage, psi, n_d, element_bytes)
        gone = OFFLOADED_TERMS[stage] if offload != "none" else ()
        return sum((v for k, v in terms.items() if k not in gone), Fraction(0))

    def comm_elements(self, stage: int, psi: int, n_d: int) -> Fraction:
        return self.value(STAGE_COMM[stage], psi, n_d)

    def comm_accumulated(self, stage: int, psi: int, n_d: int, k: int) -> Fraction:
        """Elements per rank per optimizer step over ``k`` micro-batches, from the card's per-step
        formulas: DDP (``no_sync``) and ZeRO-1 reduce once, so the card's value; ZeRO-2
        reduce-scatters every micro-batch (half of ``comm_zero12``, Ψ, each) and all-gathers the
        parameters once (the other half): (k + 1)/2 times ``comm_zero12``; ZeRO-3 does all of its
        ``comm_zero3`` (two gathers and a reduce-scatter) every micro-batch: k times."""
        per_step = self.comm_elements(stage, psi, n_d)
        if stage == 2:
            return per_step * Fraction(k + 1, 2)
        if stage == 3:
            return per_step * k
        return per_step

    def comm_accumulated_text(self, stage: int, k: int) -> str:
        base = self.text(STAGE_COMM[stage])
        if k == 1 or stage in (0, 1):
            return base
        return f"({k}+1)/2 × {base}" if stage == 2 else f"{k} × {base}"
