"""Real-time workloads on a real WebRTC stack (aiortc): cloud gaming and video calls
between ue and the testbed's server (issue 40; docs/realtime.md).

One job per module: patch (the machine-readable patch in each frame), scene (the
video), tones (audio marks), media (tracks and receive loops), stack (aiortc's
settings and timing probes), signalling, server (srv end), device (ue end),
metrics (latency, freezes, rates), summary (both ends' records joined), run (a
session on the testbed: its row).
"""
