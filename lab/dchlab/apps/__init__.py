"""dchlab.apps: app-like workloads (profiles → corpus → SPA client) and interaction
response time (docs/apps.md)."""

from __future__ import annotations

from dchlab.apps.profile import (
    INTERACTIONS,
    AppProfile,
    ProfileError,
    builtin_profiles,
    load_profile,
)

__all__ = ["INTERACTIONS", "AppProfile", "ProfileError", "builtin_profiles", "load_profile"]
