"""A progress callback that records what a sync tells it, for tests of what a person sees."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ProgressRecorder"]


@dataclass
class ProgressRecorder:
    """Called as a sync's ``progress(stage, done, total)``; keeps every call in order.

    ``runs(stage)`` cuts a stage's calls where its total changes or its count starts
    again, as a progress display draws a new bar: with totals known up front, one run
    per source and stage.
    """

    calls: list[tuple[str, int, int]] = field(default_factory=list)

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.calls.append((stage, done, total))

    def stages(self) -> set[str]:
        """The stages told of."""
        return {stage for stage, _, _ in self.calls}

    def runs(self, stage: str) -> list[list[tuple[int, int]]]:
        """The ``(done, total)`` calls of ``stage``, cut where a new bar would start."""
        found: list[list[tuple[int, int]]] = []
        for name, done, total in self.calls:
            if name != stage:
                continue
            if not found or total != found[-1][-1][1] or done < found[-1][-1][0]:
                found.append([])
            found[-1].append((done, total))
        return found
