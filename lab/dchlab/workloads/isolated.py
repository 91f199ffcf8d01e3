"""Read values out of a loaded page in a JavaScript world of our own.

An expression evaluated in the page's main world runs on the page's builtins, and
pages replace them: 2011-era libraries (Prototype, old json2 shims) overwrite
`JSON.stringify`, `Array.prototype.map` or an object's `toJSON`, and a read-out built
on them returned garbage ("driver error: Expecting property name enclosed in double
quotes"). An isolated world (CDP `Page.createIsolatedWorld`, what extensions' content
scripts run in) shares the page's DOM but has its own globals and prototypes, so
`performance`, `document` and `location` read the page's state with untouched builtins.
Values come back by value (`returnByValue`): CDP serializes them, no `JSON.stringify`.

A world is made per read-out: a script that navigates the frame after `load` destroys
the world with its document, and the next read-out then gets one in the new document.
"""

from __future__ import annotations

from typing import Any

from dchlab.workloads.validity import one_line

WORLD = "dchlab-measure"  # the world's name (shown in DevTools' context list)


async def main_frame(cdp: Any, sid: str) -> str:
    """The page's main frame id (Page.getFrameTree)."""
    tree = await cdp.send("Page.getFrameTree", {}, sid)
    return str(tree["frameTree"]["frame"]["id"])


async def evaluate(
    cdp: Any, sid: str, expression: str, frame_id: str | None = None, await_promise: bool = False
) -> Any:
    """The value of `expression` evaluated in a new isolated world of the page's main
    frame (`frame_id`, else looked up); an exception in the expression is a
    RuntimeError naming it in one line."""
    frame = frame_id or await main_frame(cdp, sid)
    world = await cdp.send("Page.createIsolatedWorld", {"frameId": frame, "worldName": WORLD}, sid)
    ev = await cdp.send(
        "Runtime.evaluate",
        {
            "expression": expression,
            "contextId": int(world["executionContextId"]),
            "returnByValue": True,
            "awaitPromise": await_promise,
        },
        sid,
    )
    if "exceptionDetails" in ev:
        det = ev["exceptionDetails"]
        text = (det.get("exception") or {}).get("description") or det.get("text", "exception")
        raise RuntimeError(f"page read-out threw: {one_line(text, 200)}")
    return (ev.get("result") or {}).get("value")
