"""Tables that fit the terminal and say what they leave out.

A table's name columns (pods, nodes: ``Col.key``) are never cut: EKS node names such as
``ip-10-0-123-45.eu-west-1.compute.internal`` stay whole and copyable. The other columns wrap. On
a terminal too narrow for that, the table first loses its outer edge, then the columns marked
``drop`` (highest first), and says which in its caption; only a terminal narrower than the names
themselves folds them (never an ellipsis). A table with more rows than ``limit`` shows the first
``limit`` and says how many more there are and where to find them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

__all__ = ["Col", "fits", "fitted", "more"]

# The narrowest a wrapping column is counted at when deciding what fits (or its header's longest word).
_MIN_WIDTH = 8


@dataclass(frozen=True)
class Col:
    header: str
    key: bool = False  # names: never cut (wrapped only at spaces, as "a -> b")
    drop: int = 0  # > 0: left out on a narrow terminal, the highest first
    right: bool = False  # right-justified (numbers)
    wrap: bool = True  # False: each cell on one line (short figures such as "94% -> 100%")


def more(hidden: int, where: str = "see -o json") -> str:
    """The line that says a table was cut: '19 more, see -o json'."""
    return f"{hidden} more, {where}"


def _words(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _lines(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _stack(cols: list[Col], rows: list[list[str]]) -> tuple[list[Col], list[list[str]]]:
    """The name columns as one, each row's names one under the other (at the first one's place)."""
    keys = [i for i, c in enumerate(cols) if c.key]
    first = keys[0]
    merged = Col(" / ".join(cols[i].header for i in keys), key=True)
    out_cols = [merged if i == first else c for i, c in enumerate(cols) if i == first or i not in keys]
    out_rows = [
        [
            "\n".join(r[k] for k in keys) if i == first else cell
            for i, cell in enumerate(r)
            if i == first or i not in keys
        ]
        for r in rows
    ]
    return out_cols, out_rows


class _Layout:
    """What a set of columns needs: each column's natural width, its longest word, and the total."""

    def __init__(self, cols: list[Col], rows: list[list[str]]) -> None:
        self.cols, self.rows = cols, rows
        self.natural = [max([_lines(c.header), *(_lines(r[i]) for r in rows)]) for i, c in enumerate(cols)]
        self.word = [max([_words(c.header), *(_words(r[i]) for r in rows)]) for i, c in enumerate(cols)]

    def need(self, kept: list[int], edge: bool, *, whole: bool = False, single: bool = False) -> int:
        """The narrowest the table can be with the columns ``kept``, no name cut (``whole``: no
        name wrapped either; ``single``: no cell wrapped at all)."""
        content = sum(self._least(c, whole=whole, single=single) for c in kept)
        return content + (3 * len(kept) + 1 if edge else 3 * (len(kept) - 1))

    def _least(self, c: int, *, whole: bool, single: bool) -> int:
        col = self.cols[c]
        if single or not col.wrap or (whole and col.key):
            return self.natural[c]
        return self.word[c] if col.key else min(self.natural[c], max(_MIN_WIDTH, _words(col.header)))


def fits(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int) -> bool:
    """Whether the table fits ``width`` with every cell on one line (after leaving out the
    ``drop`` columns, if it must)."""
    layout = _Layout(list(cols), [list(r) for r in rows])
    kept = [c for c in range(len(cols)) if cols[c].drop == 0]
    return layout.need(kept, False, whole=True, single=True) <= width


def fitted(
    title: str,
    cols: Sequence[Col],
    rows: Sequence[Sequence[str]],
    *,
    width: int,
    limit: int | None = None,
    where: str = "see -o json",
) -> Table:
    """``rows`` (plain text, one cell per column) as a table at most ``width`` columns wide,
    cut to ``limit`` rows (None: all) with a caption saying how many more and ``where``.

    On a narrow terminal it drops the outer edge, then the ``drop`` columns, then stacks the name
    columns into one (each name on its own line), so that no name is cut."""
    cells = [list(r) for r in (rows if limit is None else rows[:limit])]
    layout = _Layout(list(cols), cells)
    kept = list(range(len(cols)))
    edge = layout.need(kept, True) <= width
    dropped: list[str] = []
    while layout.need(kept, edge) > width and any(layout.cols[c].drop > 0 for c in kept):
        worst = max((c for c in kept if layout.cols[c].drop > 0), key=lambda c: (layout.cols[c].drop, c))
        kept.remove(worst)
        dropped.append(layout.cols[worst].header)
    if layout.need(kept, edge) > width and sum(1 for c in kept if layout.cols[c].key) > 1:
        layout = _Layout(*_stack([layout.cols[c] for c in kept], [[r[c] for c in kept] for r in cells]))
        kept = list(range(len(layout.cols)))
    whole = layout.need(kept, edge, whole=True) <= width
    notes = []
    if dropped:
        notes.append(f"left out at this width: {', '.join(dropped)}")
    if limit is not None and len(rows) > limit:
        notes.append(more(len(rows) - limit, where))
    table = Table(title=title, caption="; ".join(notes) or None, show_edge=edge, pad_edge=edge, caption_justify="left")
    spare = max(width - layout.need(kept, edge), 0)  # for wrapped names, the room beyond their longest word
    for c in kept:
        col = layout.cols[c]
        if col.key and whole:
            table.add_column(col.header, no_wrap=True, overflow="fold")
        elif col.key:  # wrapped at spaces only: no name is cut
            extra = min(layout.natural[c] - layout.word[c], spare)
            spare -= extra
            table.add_column(col.header, width=layout.word[c] + extra, overflow="fold")
        else:
            justify: JustifyMethod = "right" if col.right else "left"
            table.add_column(col.header, no_wrap=not col.wrap, overflow="fold", justify=justify)
    for r in layout.rows:
        table.add_row(*(Text(r[c]) for c in kept))
    return table
