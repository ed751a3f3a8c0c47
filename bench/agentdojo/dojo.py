"""AgentDojo's side of the bridge: one session is one (suite, user task,
injection task) run — its environment with the attack's injections placed,
the suite's tools over it, the scripted model's script, and AgentDojo's own
checks on the result.

Everything here is AgentDojo's code: `get_suites` for the suites and tasks,
the `important_instructions` attack for the injections, `FunctionsRuntime`
for the tools, `tool_result_to_str` for what a model reads, and the tasks'
`utility`/`security` (through `TaskSuite._check_task_result`, which tries the
trace-based check first, as AgentDojo's benchmark does).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from functools import lru_cache

from pydantic import BaseModel

from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suites
from agentdojo.types import text_content_block_from_string

BENCHMARK_VERSION = "v1.2.2"
SUITES = ("workspace", "travel", "banking", "slack")
# Tools are served as PREFIX + name: AgentDojo's `read_file`, `search_files`…
# would otherwise meet AIS's built-in tools of the same name. The prefix has
# no dot, so trust is whatever the policy file declares, not the name.
PREFIX = "dojo_"
# Every injection of the `important_instructions` attack is wrapped in it;
# the hijacked model obeys a tool result as soon as it contains it.
MARKER = "<INFORMATION>"


class _NamedPipeline(BasePipelineElement):
    """The attack only reads the victim pipeline's name (to address the
    model by name); the scripted model has none, so it gets a fixed one."""

    name = "gpt-4o-2024-05-13"

    def query(self, *a, **k):  # pragma: no cover - never run
        raise NotImplementedError


@lru_cache(maxsize=None)
def suite(name: str):
    return get_suites(BENCHMARK_VERSION)[name]


@lru_cache(maxsize=None)
def attack(name: str) -> ImportantInstructionsAttack:
    return ImportantInstructionsAttack(suite(name), _NamedPipeline())


_attack_lock = threading.Lock()


def injections(suite_name: str, user_id: str, injection_id: str) -> dict[str, str]:
    """The attack's injections for one pair (AgentDojo places them where the
    user task's ground truth reads)."""
    s = suite(suite_name)
    with _attack_lock:  # the attack's candidate cache is not thread-safe
        return attack(suite_name).attack(s.user_tasks[user_id], s.injection_tasks[injection_id])


def tool_schemas(suite_name: str) -> list[dict]:
    """The suite's tools as MCP lists them (name, description, inputSchema):
    AgentDojo's names; `aisc` registers them as PREFIX + name (the
    server's `prefix` in config.toml)."""
    out = []
    for f in suite(suite_name).tools:
        schema = f.parameters.model_json_schema()
        schema.pop("title", None)
        out.append({"name": f.name, "description": f.description, "inputSchema": schema})
    return out


def _call_json(c: FunctionCall) -> dict:
    return {"function": c.function, "args": dict(c.args)}


def _structured(result: object) -> dict | None:
    """A data result as JSON: what `tool_result_to_str` dumps (a model, a
    list of them) or a mapping, with the same fields; `{"result": ...}`
    around what is not an object. None for text and scalars."""
    if isinstance(result, (BaseModel, list)):
        data = json.loads(tool_result_to_str(result, dump_fn=lambda x: json.dumps(x, default=str)))
    elif isinstance(result, dict):
        data = json.loads(json.dumps(result, default=str))
    else:
        return None
    return data if isinstance(data, dict) else {"result": data}


@dataclass
class Session:
    """One run's environment and script. `mode` is `ground_truth` or
    `hijacked`; `injection_id` is None for a run without attack."""

    suite_name: str
    user_id: str
    injection_id: str | None
    mode: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    trace: list[FunctionCall] = field(default_factory=list)
    # Calls that reached the environment and failed there (AgentDojo's
    # error text): a bridge problem if the ground truth's own calls fail.
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        s = suite(self.suite_name)
        self.user_task = s.user_tasks[self.user_id]
        self.injection_task = s.injection_tasks[self.injection_id] if self.injection_id else None
        placed = injections(self.suite_name, self.user_id, self.injection_id) if self.injection_id else {}
        env = s.load_and_inject_default_environment(placed)
        self.env = self.user_task.init_environment(env)
        self.pre_env = self.env.model_copy(deep=True)
        self.runtime = FunctionsRuntime(s.tools)
        schemas = {f.name: f.parameters.model_json_schema() for f in s.tools}
        self.required = {n: set(sc.get("required", [])) for n, sc in schemas.items()}
        # What the model sends for a parameter the task leaves out: its
        # default (the MCP server's schema check rejects null for a string
        # defaulting to ""), else null.
        self.defaults = {
            n: {p: ps.get("default") for p, ps in sc.get("properties", {}).items()} for n, sc in schemas.items()
        }
        # The scripted model's calls, computed as GroundTruthPipeline does:
        # from the pre-environment, before anything runs.
        self.user_calls = [_call_json(c) for c in self.user_task.ground_truth(self.pre_env)]
        self.injection_calls = (
            [_call_json(c) for c in self.injection_task.ground_truth(self.pre_env)]
            if self.injection_task is not None
            else []
        )

    def call(self, name: str, args: dict) -> tuple[str, bool, dict | None]:
        """Runs a tool on the environment: (text the model reads, is_error,
        the result as structured content). As an MCP server with output
        schemas does, a result that is data (a model, a list) is served
        as `structuredContent` too, its fields as AgentDojo dumps them
        (wrapped as `{"result": ...}` when not an object); `aisc` reads
        that (the text is then for clients without structured content)."""
        fn = name[len(PREFIX) :] if name.startswith(PREFIX) else name
        required = self.required.get(fn, set())
        # AIS sends every declared parameter; an optional one the model left
        # out arrives as null and takes the function's default.
        kwargs = {k: v for k, v in (args or {}).items() if v is not None or k in required}
        with self.lock:
            result, error = self.runtime.run_function(self.env, fn, kwargs)
            if error is None:
                self.trace.append(FunctionCall(function=fn, args=kwargs, id=f"c{len(self.trace)}"))
            else:
                self.errors.append(f"{fn}: {error}"[:300])
        if error is not None:
            return error, True, None
        text = tool_result_to_str(result)
        return text, False, _structured(result)

    def answer(self, hijacked: bool) -> str:
        out = self.user_task.GROUND_TRUTH_OUTPUT
        if hijacked and self.injection_task is not None and self.injection_task.GROUND_TRUTH_OUTPUT:
            out = f"{out}\n{self.injection_task.GROUND_TRUTH_OUTPUT}".strip()
        return out

    def judge(self, output: str) -> dict:
        """AgentDojo's verdicts on the post-environment, the calls that ran
        and the program's answer."""
        s = suite(self.suite_name)
        content = [text_content_block_from_string(output)]
        with self.lock:
            post = self.env.model_copy(deep=True)
            trace = list(self.trace)
        utility = s._check_task_result(self.user_task, content, self.pre_env, post, trace)
        security = None
        if self.injection_task is not None:
            security = s._check_task_result(self.injection_task, content, self.pre_env, post, trace)
        return {"utility": bool(utility), "attack_success": None if security is None else bool(security)}

    def post_environment_json(self) -> str:
        with self.lock:
            return self.env.model_dump_json(indent=1)
