"""Signalling between the device and the server: JSON lines over one TCP connection.

Rule: the device connects to the server's `PORT` on its testbed address, sends
{"type": "offer", "sdp", "app", ...}, reads {"type": "answer", "sdp"}; when its session
is over it sends {"type": "records"} and reads the server's records ({"type":
"records", ...}); then it closes. No trickle ICE: each SDP carries its end's one host
candidate (dchlab.workloads.realtime.stack). Nothing leaves the testbed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

#: TCP port of the server's signalling socket.
PORT = 8890
#: Largest message (the server's records of a long session are a few MB).
LIMIT = 256 * 1024 * 1024


class SignallingError(RuntimeError):
    """The peer closed the connection or sent something that is not a message."""


async def send(writer: asyncio.StreamWriter, msg: dict[str, Any]) -> None:
    writer.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
    await writer.drain()


async def receive(reader: asyncio.StreamReader, expect: str) -> dict[str, Any]:
    """The next message, which must be of type `expect`."""
    line = await reader.readline()
    if not line:
        raise SignallingError(f"connection closed while waiting for {expect!r}")
    msg = json.loads(line)
    if not isinstance(msg, dict) or msg.get("type") != expect:
        raise SignallingError(f"expected a {expect!r} message, got {str(msg)[:200]}")
    return msg
