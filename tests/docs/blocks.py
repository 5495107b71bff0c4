"""Fenced code blocks of a markdown page, with the prose that introduces them."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^```(\w*)\s*$")
_SAVE_AS = re.compile(r"[Ss]ave\s+(?:this|the\s+file)\s+as\s+`([^`]+)`")


@dataclass
class Block:
    lang: str
    text: str
    #: The prose between the previous block (or the section's heading) and this one.
    before: str

    @property
    def file_name(self) -> str | None:
        """The file the prose tells the reader to save this block as, if any."""
        found = _SAVE_AS.findall(self.before)
        return found[-1] if found else None

    def lines(self) -> list[str]:
        """Shell lines without comments (a trailing ``# ...`` included) and blanks."""
        out = []
        for line in self.text.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                out.append(line)
        return out


def section(markdown: str, heading: str) -> str:
    """The text under the ``## heading`` (to the next heading of that level or above)."""
    level = heading.split(" ", 1)[0]
    lines = markdown.splitlines()
    start = lines.index(heading)
    end = len(lines)
    in_fence = False
    for i in range(start + 1, len(lines)):
        if _FENCE.match(lines[i].strip()):
            in_fence = not in_fence
        elif not in_fence and re.match(rf"^#{{1,{len(level)}}} ", lines[i]):
            end = i
            break
    return "\n".join(lines[start + 1 : end])


def fenced_blocks(markdown: str) -> list[Block]:
    """Every fenced block, in order."""
    blocks: list[Block] = []
    prose: list[str] = []
    body: list[str] = []
    lang: str | None = None
    for line in markdown.splitlines():
        opened = _FENCE.match(line.strip())
        if opened is not None and lang is None:
            lang = opened.group(1)
            body = []
        elif opened is not None and lang is not None:
            blocks.append(Block(lang, "\n".join(body) + "\n", "\n".join(prose)))
            lang, prose = None, []
        elif lang is not None:
            body.append(line)
        else:
            prose.append(line)
    return blocks
