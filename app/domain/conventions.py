"""Conventions a key depends on, and how a stem fixes them.

A number like "the model states of 70B" has more than one defensible value unless the question
says how to count: decimal GB or binary GiB, fp16 or fp32 gradients, an fp16 working copy
beside an fp32 master copy (apex O2, DeepSpeed) or fp32 parameters under autocast (torch.amp,
FSDP2's ``MixedPrecisionPolicy``), whether a ring's ``(N-1)/N`` is counted, whether activations
count. A template declares the conventions its key depends on (``conventions:``), and a pitfall
that is the key under another convention names it (``convention:``). Validation then requires
the stem to state each declared convention, in every language, in one of the phrasings below
(:func:`stated`), so that the learner holding the other convention is told which one the
question uses rather than graded wrong for a defensible answer.
"""

from __future__ import annotations

from collections.abc import Mapping

# convention -> value -> language -> phrases, any of which in the stem states the value
PHRASES: Mapping[str, Mapping[str, Mapping[str, tuple[str, ...]]]] = {
    "units": {
        "decimal": {
            "en": ("1 GB = $10^9$ bytes", "decimal units", "decimal GB"),
            "zh": ("1 GB = $10^9$ 字节", "十进制"),
        },
        "binary": {
            "en": ("1 GiB = $2^{30}$ bytes", "binary units"),
            "zh": ("1 GiB = $2^{30}$ 字节", "二进制"),
        },
    },
    "gradients": {
        "fp16": {
            "en": ("fp16 gradients", "gradients in fp16", "2-byte gradients"),
            "zh": ("fp16 梯度", "梯度为 fp16", "梯度用 fp16", "2 字节梯度", "梯度为 2 字节"),
        },
        "fp32": {
            "en": (
                "fp32 gradients",
                "gradients in fp32",
                "4-byte gradients",
                "fp32 copy of the gradients",
            ),
            "zh": ("fp32 梯度", "梯度为 fp32", "梯度用 fp32", "4 字节梯度"),
        },
    },
    "layout": {
        "master-copy": {
            "en": ("fp32 master copy", "fp32 master weights"),
            "zh": ("fp32 主权重",),
        },
        "autocast": {
            "en": ("autocast", "MixedPrecisionPolicy"),
            "zh": ("autocast", "MixedPrecisionPolicy"),
        },
    },
    "ring": {
        "counted": {
            "en": ("$(N_d - 1)/N_d$", "exact ring", "counted exactly"),
            "zh": ("$(N_d - 1)/N_d$", "精确"),
        },
        "ignored": {
            "en": (
                "ignoring $(N_d - 1)/N_d$",
                "ignoring the $(N_d - 1)/N_d$ factor",
                "as the ZeRO paper counts",
                "counted as in the ZeRO paper",
            ),
            "zh": ("忽略 $(N_d - 1)/N_d$", "按 ZeRO 论文的口径"),
        },
    },
    "activations": {
        "excluded": {
            "en": (
                "before activations",
                "not counting activations",
                "without activations",
                "excluding activations",
            ),
            "zh": ("不计激活",),
        },
        "included": {
            "en": ("including activations", "with activations"),
            "zh": ("包括激活", "含激活"),
        },
    },
}


def known(convention: str, value: str) -> bool:
    return value in PHRASES.get(convention, {})


def stated(convention: str, value: str, stem: str, lang: str) -> bool:
    """Whether ``stem`` (one language's source text) states ``value`` of ``convention``."""
    phrases = PHRASES[convention][value].get(lang, ())
    folded = stem.casefold()
    return any(phrase.casefold() in folded for phrase in phrases)


__all__ = ["PHRASES", "known", "stated"]
