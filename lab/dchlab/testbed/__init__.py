"""dchlab.testbed — a dual-channel world in network namespaces (see docs/testbed.md).

Public API:
    TestbedConfig, Testbed, TestbedError, TestbedInterrupted
    known_schemes(), get_scheme(spec), Scheme, register   (dchlab.testbed.schemes)
    known_channels(), resolve_channel(spec, seed)          (dchlab.testbed.channels)
    ensure_ca(dir=None) -> (cert, key); make_nss_db(dir, ca_cert); copy_nss_db(dir, ca_cert)
                                                            (dchlab.testbed.ca)
    cleanup_dead_runs()                                     (dchlab.testbed.runrecord)
"""

from dchlab.testbed.ca import copy_nss_db, ensure_ca, make_nss_db
from dchlab.testbed.channels import known_channels, resolve_channel
from dchlab.testbed.config import TestbedConfig
from dchlab.testbed.core import Testbed
from dchlab.testbed.errors import TestbedError, TestbedInterrupted
from dchlab.testbed.runrecord import cleanup_dead_runs
from dchlab.testbed.schemes import Scheme, get_scheme, known_schemes, register

__all__ = [
    "Scheme",
    "Testbed",
    "TestbedConfig",
    "TestbedError",
    "TestbedInterrupted",
    "cleanup_dead_runs",
    "copy_nss_db",
    "ensure_ca",
    "get_scheme",
    "known_channels",
    "known_schemes",
    "make_nss_db",
    "register",
    "resolve_channel",
]
