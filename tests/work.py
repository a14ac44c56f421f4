"""Bounding a test's work, not its time: a loaded CI machine slows a test down but never makes it do more."""

from __future__ import annotations

import sys
from typing import Callable

__all__ = ["OverBudget", "calls"]


class OverBudget(BaseException):  # not an Exception: no code under test may swallow it
    pass


def calls(fn: Callable[[], object], budget: int) -> int:
    """The Python and builtin function calls ``fn()`` makes (``sys.setprofile``'s ``call`` and ``c_call``
    events, this thread); raises :class:`OverBudget` as soon as they pass ``budget``, so a loop without end ends
    too.  Imports count: warm the code up first, and never let a budget run out inside an import (the module would
    stay half initialised for every later test)."""
    n = 0

    def count(frame, event, arg):
        nonlocal n
        if event in ("call", "c_call"):
            n += 1
            if n > budget:
                raise OverBudget(f"more than {budget:,} calls")

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n
