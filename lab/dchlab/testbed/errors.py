"""The one exception type the testbed raises: messages a user can act on."""

from __future__ import annotations

from dchlab.errors import EXIT_TESTBED, UserError


class TestbedError(UserError, RuntimeError):
    """A testbed step failed; the message names the step and what to do about it."""

    exit_code = EXIT_TESTBED

    __test__ = False  # not a pytest test class despite the name
