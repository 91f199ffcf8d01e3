"""dchlab.traces: trace importers, the Table 1 scenario synthesizer, statistics,
plots and channel profiles (formats: docs/formats.md; model: docs/traces.md).

Public API for the rest of the lab lives in `dchlab.traces.profiles`:
`resolve_channel`, `known_channels`, `trace_offset_ms`, `profile_summary`.
"""
