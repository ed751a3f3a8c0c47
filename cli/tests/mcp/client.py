"""Drives an AIS MCP server with the official MCP Python SDK.

usage: client.py stdio AISC PROGRAM [ARGS...]  |  client.py http URL
Prints one JSON object: the tools listed and the results of calling them.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def dump(result):
    return {
        "is_error": bool(result.is_error),
        "structured": result.structured_content,
        "text": [c.text for c in result.content if getattr(c, "type", "") == "text"],
    }


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        target = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
    else:
        target = sys.argv[2]
    out = {}
    async with Client(target) as client:
        tools = await client.list_tools()
        out["tools"] = {
            t.name: {"input": t.input_schema, "output": t.output_schema} for t in tools.tools
        }
        out["echo"] = dump(await client.call_tool("Echo", {"topic": "bees"}))
        out["check_bad"] = dump(
            await client.call_tool(
                "check", {"source": "agent A {\n  flow f() -> str { return y }\n}\n"}
            )
        )
        out["build_ok"] = dump(
            await client.call_tool(
                "build",
                {"source": "agent A {\n  @entry flow f(x: str) -> str { return ask(x) }\n}\n"},
            )
        )
        out["bad_args"] = dump(await client.call_tool("Echo", {}))
    print(json.dumps(out))


asyncio.run(main())
