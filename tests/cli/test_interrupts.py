"""A Ctrl-C is never lost: `noting_interrupts` raises KeyboardInterrupt as Python's own handler
does and notes it, so a long command asks again between batches (`raise_if_interrupted`)."""

from __future__ import annotations

import contextlib
import signal

import pytest

from judgeflow.cli.interrupts import noting_interrupts, raise_if_interrupted


def test_a_swallowed_interrupt_is_raised_again_at_the_next_check() -> None:
    before = signal.getsignal(signal.SIGINT)
    with noting_interrupts():
        raise_if_interrupted()  # nothing noted yet: nothing raised
        handler = signal.getsignal(signal.SIGINT)
        assert callable(handler)
        with contextlib.suppress(KeyboardInterrupt):  # as when a __del__ drops it
            handler(signal.SIGINT, None)
        with pytest.raises(KeyboardInterrupt):
            raise_if_interrupted()
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_a_new_block_starts_with_nothing_noted() -> None:
    with noting_interrupts(), pytest.raises(KeyboardInterrupt):
        signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # type: ignore[operator]
    with noting_interrupts():
        raise_if_interrupted()
