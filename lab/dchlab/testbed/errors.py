"""The one exception type the testbed raises: messages a user can act on."""

from __future__ import annotations


class TestbedError(RuntimeError):
    """A testbed step failed; the message names the step and what to do about it."""

    __test__ = False  # not a pytest test class despite the name
