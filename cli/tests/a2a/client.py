"""Drives `aisc serve`'s A2A server with the official A2A Python SDK
(`a2a-sdk` on PyPI) and prints what it saw as one JSON object.

usage: client.py BASE_URL SLOW_BASE_URL
  BASE_URL       an agent's base URL (its card is at BASE_URL/.well-known/agent-card.json)
  SLOW_BASE_URL  the same for an agent whose runs last long, one at a time
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from google.protobuf import struct_pb2


def text_message(text, **metadata):
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    for k, v in metadata.items():
        m.metadata[k] = v
    return m


def data_message(obj):
    v = struct_pb2.Value()
    v.struct_value.update(obj)
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(data=v)])


def d(msg):
    return MessageToDict(msg)


async def collect(client, message, **config):
    req = SendMessageRequest(message=message)
    for k, v in config.items():
        setattr(req.configuration, k, v)
    events = []
    async for ev in client.send_message(req):
        events.append(d(ev))
    return events


async def error_name(coro):
    try:
        await coro
    except (TaskNotFoundError, TaskNotCancelableError, InvalidParamsError) as e:
        return type(e).__name__
    except A2AClientError as e:
        return "A2AClientError: " + str(e)
    return None


async def main(base, slow_base):
    out = {}
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        out["card"] = d(card)

    blocking = ClientFactory(ClientConfig(streaming=False))
    streaming = ClientFactory(ClientConfig(streaming=True))

    client = await blocking.create_from_url(base)
    try:
        ev = await collect(client, text_message("bees"))
        out["blocking"] = ev
        task_id = ev[-1]["task"]["id"]
        out["get"] = d(await client.get_task(GetTaskRequest(id=task_id)))
        out["data"] = await collect(client, data_message({"topic": "wasps"}))
        out["get_unknown"] = await error_name(client.get_task(GetTaskRequest(id="no-such-task")))
        out["cancel_done"] = await error_name(client.cancel_task(CancelTaskRequest(id=task_id)))
        out["bad_args"] = await error_name(collect(client, data_message({"nope": 1})))
    finally:
        await client.close()

    client = await streaming.create_from_url(base)
    try:
        out["stream"] = await collect(client, text_message("ants"))
    finally:
        await client.close()

    # The same agent through the SDK's A2A 0.3 transport (message/send,
    # message/stream, tasks/get with 0.3 shapes), chosen by a card that
    # offers only the 0.3 interface.
    legacy_card = AgentCard()
    legacy_card.CopyFrom(card)
    del legacy_card.supported_interfaces[:]
    legacy_card.supported_interfaces.append(
        AgentInterface(url=card.supported_interfaces[0].url, protocol_binding="JSONRPC", protocol_version="0.3")
    )
    client = blocking.create(legacy_card)
    try:
        ev = await collect(client, text_message("moths"))
        out["legacy_send"] = ev
        out["legacy_get"] = d(await client.get_task(GetTaskRequest(id=ev[-1]["task"]["id"])))
    finally:
        await client.close()
    client = streaming.create(legacy_card)
    try:
        out["legacy_stream"] = await collect(client, text_message("gnats"))
    finally:
        await client.close()

    # The slow server runs one task at a time: the first keeps it busy,
    # the second waits (submitted) and is cancelled.
    client = await blocking.create_from_url(slow_base)
    try:
        ev = await collect(client, text_message("busy"), return_immediately=True)
        busy_id = ev[-1]["task"]["id"]
        for _ in range(600):
            busy = d(await client.get_task(GetTaskRequest(id=busy_id)))
            if busy["status"]["state"] != "TASK_STATE_SUBMITTED":
                break
            await asyncio.sleep(0.05)
        out["busy_started"] = busy["status"]["state"]
        ev = await collect(client, text_message("slowly"), return_immediately=True)
        slow_id = ev[-1]["task"]["id"]
        out["slow_started"] = ev[-1]["task"]["status"]["state"]
        out["cancel"] = d(await client.cancel_task(CancelTaskRequest(id=slow_id)))
        out["get_cancelled"] = d(await client.get_task(GetTaskRequest(id=slow_id)))
    finally:
        await client.close()

    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
