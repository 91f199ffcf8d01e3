"""The base of every error a user can act on.

A `UserError` says what is wrong with the input (file, field, flag) or the set-up and
what to do about it, so `dch` (dchlab.cli.main) prints its message without a traceback
and exits with its `exit_code`. Each part of the lab keeps its own subclass
(TestbedError, CorpusError, CampaignError, TraceFormatError, ...), which also derives
from the builtin it always was (ValueError, RuntimeError), so existing `except`
clauses keep working.
"""

from __future__ import annotations

#: Bad input: a file, a field or a flag.
EXIT_BAD_INPUT = 2
#: A workload or cluster the run needs is not there (`dch run`, `dch demo`).
EXIT_UNAVAILABLE = 3
#: A campaign stopped on the same setup error repeated (`dch run`).
EXIT_STOPPED = 4
#: The testbed could not be built or failed (`dch shell`: not the command run in it).
EXIT_TESTBED = 125


class UserError(Exception):
    """Bad input or an unmet prerequisite; the message is all the user needs."""

    exit_code = EXIT_BAD_INPUT
