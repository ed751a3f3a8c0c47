"""The MCP server `aisc run` starts for one AgentDojo run (stdio,
newline-delimited JSON-RPC 2.0, handshake revision 2025-06-18).

It serves the suite's tools, with AgentDojo's own schemas, over the run's
environment. The environment lives in the runner (`run.py`), which holds
every run's session in one process, so this server is only the protocol:
it relays `tools/list` and `tools/call` to the runner on loopback. Reason:
importing agentdojo takes about 2.5 s, and a full run starts about two
thousand servers. Only the standard library, for the same reason.

    mcp_server.py http://127.0.0.1:PORT SESSION_ID

At exit (stdin closed) it asks the runner to write the session's
post-environment to its file (`POST /env/SESSION/close`).
"""

from __future__ import annotations

import json
import sys
import urllib.request

VERSION = "2025-06-18"


def post(base: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(
        f"{base}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def handle(base: str, session: str, msg: dict) -> dict | None:
    method = msg.get("method")
    mid = msg.get("id")
    if mid is None:
        return None  # a notification (notifications/initialized, cancelled)
    if method == "initialize":
        result = {
            "protocolVersion": VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "agentdojo-bridge", "version": "0.1.35"},
        }
    elif method == "tools/list":
        result = {"tools": post(base, f"/env/{session}/tools", {})["tools"]}
    elif method == "tools/call":
        p = msg.get("params") or {}
        r = post(base, f"/env/{session}/call", {"name": p.get("name"), "arguments": p.get("arguments") or {}})
        result = {"content": [{"type": "text", "text": r["text"]}], "isError": r["is_error"]}
        if r.get("structured") is not None:
            result["structuredContent"] = r["structured"]
    elif method == "ping":
        result = {}
    else:
        # `server/discover` included: this is a handshake-era server.
        return {"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": mid, "result": result}


def main() -> int:
    base, session = sys.argv[1], sys.argv[2]
    try:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError as e:
                out = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": str(e)}}
            else:
                try:
                    out = handle(base, session, msg)
                except Exception as e:  # the runner is gone or failed: say so to the client
                    out = {"jsonrpc": "2.0", "id": msg.get("id"), "error": {"code": -32603, "message": str(e)}}
            if out is not None:
                sys.stdout.write(json.dumps(out) + "\n")
                sys.stdout.flush()
    finally:
        try:
            post(base, f"/env/{session}/close", {})
        except Exception:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
