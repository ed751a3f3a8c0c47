"""Drives `aisc serve`'s A2A server with the official A2A Python SDK: two
messages in one context (the second must see the first on its thread),
then one without a context and a follow-up in the context the reply named.
Prints what it saw as one JSON object.

usage: thread_client.py BASE_URL
"""

import asyncio
import json
import sys
import uuid

from google.protobuf.json_format import MessageToDict

from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest


def message(text, context_id=None):
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        m.context_id = context_id
    return m


async def send(client, msg):
    task = None
    async for ev in client.send_message(SendMessageRequest(message=msg)):
        d = MessageToDict(ev)
        task = d.get("task", task)
    return {
        "contextId": task.get("contextId"),
        "state": task["status"]["state"],
        "text": task["artifacts"][0]["parts"][0]["text"],
    }


async def main(base):
    client = await ClientFactory(ClientConfig(streaming=False)).create_from_url(base)
    out = {}
    try:
        out["first"] = await send(client, message("hello", "sdk-conv"))
        out["second"] = await send(client, message("again", "sdk-conv"))
        out["fresh"] = await send(client, message("fresh"))
        out["follow"] = await send(client, message("more", out["fresh"]["contextId"]))
    finally:
        await client.close()
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
