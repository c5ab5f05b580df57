"""What a comment says a batch size is: the batch of all devices, or of one.

The words are read for their meaning, not matched as whole sentences:

- a multiplication over devices (``# double the batch size for the two GPUs``, ``# 64 per GPU
  x 2``, ``# twice the batch: one per replica``): the value is a per-device batch times a
  count, so it is the batch of all of them;
- "per GPU" / "per replica" / "per device" (or "each GPU") with no such multiplication: the
  value IS the per-device batch;
- a word for the whole batch (total, effective, overall, global, combined, aggregate), or the
  batch of several devices (``across replicas``, ``over all GPUs``, ``for 2 GPUs``): the batch
  of all devices.

A multiplication says so beside a device word, or when what it multiplies is the batch itself
(``#Double the batch size``: only comments on a batch that trains under a strategy with
several replicas are read, and there a batch multiplied by hand is the one-device batch made
the batch of all of them); ``# double the default`` is a bigger batch, not a global one, and
"per GPU" beside it says the per-device batch was changed.
"""

from __future__ import annotations

import io
import re
import tokenize

GLOBAL = "global"
PER_DEVICE = "per device"

_DEVICE = r"(?:gpu|replica|device|worker|core|tpu|node|host|card|accelerator|chip)"
_DEVICES = r"(?:gpus|replicas|devices|workers|cores|tpus|nodes|hosts|cards|accelerators|chips)"
_NUMBER = r"(?:\d+|two|three|four|five|six|seven|eight|sixteen|both|all|several|multiple)"

_DEVICE_WORD = re.compile(rf"\b{_DEVICE}s?\b", re.IGNORECASE)
_PER_DEVICE = re.compile(rf"\bper[-_ ]?{_DEVICE}\b|\beach {_DEVICE}\b|\b{_DEVICE}[-_ ]local\b", re.IGNORECASE)
_MULTIPLIED = re.compile(
    r"\b(?:double[ds]?|doubling|triple[ds]?|tripling|quadruple[ds]?|twice|thrice)\b"
    r"|(?:\bx(?!86|64)|\*|×)\s*(?:\d+|two|three|four|eight)\b"
    r"|\b(?:\d+|two|three|four|eight)\s*(?:x|\*|×)\s*\d+\b"
    r"|\b(?:\d+|two|three|four|eight)\s+times\b|\btimes\s+(?:\d+|two|three|four|eight)\b"
    r"|\bmultiplied by\s+(?:\d+|two|three|four|eight)\b",
    re.IGNORECASE,
)
# The batch itself multiplied (``double the batch size``, ``batch size doubled``).
_BATCH_MULTIPLIED = re.compile(
    r"\b(?:double[ds]?|doubling|triple[ds]?|tripling|quadruple[ds]?|quadrupling|twice|thrice)\s+"
    r"(?:the\s+|our\s+|its\s+|this\s+)?(?:original\s+|old\s+|usual\s+)?batch\b"
    r"|\bbatch(?:[-_ ]?size)?\s+(?:is\s+|was\s+)?(?:doubled|tripled|quadrupled)\b",
    re.IGNORECASE,
)
_WHOLE = re.compile(r"\b(?:total|effective|overall|global|combined|aggregated?)\b", re.IGNORECASE)
# Spread over devices (``across replicas``, ``over all the GPUs``), or sized for a number of them
# (``for 8 GPUs``, ``on both GPUs``; not ``on our GPUs``, which is where one batch fits).
_SEVERAL = re.compile(
    rf"\b(?:across|over|among|between)\s+(?:(?:all|the|every|any|{_NUMBER})\s+)*{_DEVICE}s?\b"
    rf"|\b(?:for|on|with|of)\s+(?:the\s+)?{_NUMBER}\s+(?:the\s+)?{_DEVICES}\b"
    rf"|\ball\s+(?:the\s+)?{_DEVICES}\b",
    re.IGNORECASE,
)


def meaning(text: str) -> str | None:
    """GLOBAL, PER_DEVICE, or None (the words say neither)."""
    if not text:
        return None
    if _MULTIPLIED.search(text) and _DEVICE_WORD.search(text):
        return GLOBAL
    if _PER_DEVICE.search(text):
        return PER_DEVICE
    if _BATCH_MULTIPLIED.search(text):
        return GLOBAL
    if _WHOLE.search(text) or _SEVERAL.search(text):
        return GLOBAL
    return None


def comments_by_line(source: str) -> dict[int, str]:
    """The comment on each line of ``source`` (without its ``#``); empty when the source does
    not tokenize."""
    found: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = token.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return {}
    return found


def comment_lines_above(lines: list[str], line: int) -> list[int]:
    """The lines of the comment block written right above ``line`` (1-based), nearest first."""
    found = []
    above = line - 1
    while above >= 1 and lines[above - 1].lstrip().startswith("#"):
        found.append(above)
        above -= 1
    return found
