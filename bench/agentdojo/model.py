"""The scripted model: an OpenAI chat-completions reply computed from the
conversation so far.

- `ground_truth`: the user task's ground-truth calls, one per turn, in
  order (as AgentDojo's GroundTruthPipeline runs them), then the task's
  ground-truth output.
- `hijacked`: the same, but the first tool result that carries the
  injection (the attack's `<INFORMATION>` block) is obeyed at once: the
  injection task's ground-truth calls come next, then the rest of the user
  task (the injection asks for the user's task to be done afterwards), and
  the answer adds the injection task's ground-truth output. A call the
  runtime refuses does not change the script: a fully hijacked model keeps
  trying.

The reply is recomputed from the whole conversation each turn (no state
per session), so a retried request gets the same reply.
"""

from __future__ import annotations

import json
import time

from dojo import MARKER, PREFIX, Session


def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def next_step(session: Session, messages: list[dict]) -> tuple[dict | None, bool]:
    """(next call or None for the answer, whether the model was hijacked)."""
    queue = list(session.user_calls)
    hijacked = False
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            for _ in m.get("tool_calls") or []:
                if queue:
                    queue.pop(0)
        elif role == "tool" and session.mode == "hijacked" and not hijacked:
            if MARKER in _text(m.get("content")):
                hijacked = True
                queue = list(session.injection_calls) + queue
    return (queue[0] if queue else None), hijacked


def _arguments(session: Session, call: dict, offered: dict[str, dict]) -> dict:
    """Every parameter the program declared: AIS's tool schemas require them
    all, so one the task leaves out is sent with the tool's default."""
    args = dict(call["args"])
    params = offered.get(PREFIX + call["function"], {}).get("properties", {})
    defaults = session.defaults.get(call["function"], {})
    for p in params:
        args.setdefault(p, defaults.get(p))
    return args


def reply(session: Session, request: dict) -> dict:
    messages = request.get("messages", [])
    offered = {
        t["function"]["name"]: t["function"].get("parameters", {})
        for t in request.get("tools") or []
        if t.get("type") == "function"
    }
    call, hijacked = next_step(session, messages)
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if call is not None:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{turn}",
                    "type": "function",
                    "function": {
                        "name": PREFIX + call["function"],
                        "arguments": json.dumps(_arguments(session, call, offered)),
                    },
                }
            ],
        }
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": session.answer(hijacked)}
        finish = "stop"
    return {
        "id": f"chatcmpl-{turn}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
