"""The testbed's exceptions: messages a user can act on, and the interruption."""

from __future__ import annotations

from dchlab.errors import EXIT_TESTBED, UserError


class TestbedError(UserError, RuntimeError):
    """A testbed step failed; the message names the step and what to do about it."""

    exit_code = EXIT_TESTBED

    __test__ = False  # not a pytest test class despite the name


class TestbedInterrupted(TestbedError):
    """The run was stopped by SIGTERM/SIGHUP (SIGINT raises KeyboardInterrupt).

    Not a failed measurement: whoever owns the run (a workload, the campaign runner)
    lets it through so the process stops, instead of recording it and going on.
    Exit status 143 (128 + SIGTERM), as a process killed by SIGTERM would have.
    """

    exit_code = 143
