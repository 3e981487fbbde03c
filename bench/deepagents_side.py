"""deepagents' side of the benchmark. Runs in bench/.venv-deepagents (see the Makefile).

bench/.venv-deepagents/bin/python bench/deepagents_side.py SCENARIO key=value ...
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import scenarios
from scenarios import Answer, ModelClock, Run


def _cold_import() -> dict[str, Any]:
    started = time.perf_counter()
    import deepagents  # noqa: F401

    return {"ms": (time.perf_counter() - started) * 1000}


def _chat_model(clock: ModelClock) -> Any:
    """A LangChain chat model that follows `scenarios.next_action`; built after import
    so that the import scenario times deepagents alone."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import Field

    class ScriptChatModel(BaseChatModel):
        bound: list[Any] = Field(default_factory=list)
        seen: list[Any] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "bench-script"

        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
            self.bound = list(tools)
            return self

        def _generate(self, messages: list[Any], stop: Any = None, **kwargs: Any) -> ChatResult:
            started = clock.enter()
            if not self.seen:
                self.seen = list(messages)
            task = next(m.content for m in messages if isinstance(m, HumanMessage))
            last = messages[-1]
            action = scenarios.next_action(
                task, str(last.content) if isinstance(last, ToolMessage) else None
            )
            if isinstance(action, Answer):
                message = AIMessage(content=action.text)
            else:
                call_id = f"call_{len(clock.starts)}"
                message = AIMessage(
                    content="",
                    tool_calls=[{"name": action.name, "args": action.args, "id": call_id}],
                )
            clock.leave(started)
            return ChatResult(generations=[ChatGeneration(message=message)])

        async def _agenerate(
            self, messages: list[Any], stop: Any = None, **kwargs: Any
        ) -> ChatResult:
            return self._generate(messages, stop, **kwargs)

    return ScriptChatModel()


def _agent(model: Any, backend: Any = None, *, todos: bool = False) -> Any:
    """deepagents' default agent plus `add`; `todos` adds the `write_todos` middleware,
    which deepagents 0.7 no longer includes by default."""
    from deepagents import create_deep_agent
    from langchain.agents.middleware import TodoListMiddleware
    from langchain_core.tools import tool

    middleware = [TodoListMiddleware()] if todos else []
    return create_deep_agent(model, [tool(scenarios.add)], backend=backend, middleware=middleware)


async def _run(agent: Any, clock: ModelClock, task: str) -> Run:
    from langchain_core.messages import AIMessage, ToolMessage

    started = time.perf_counter()
    state = await agent.ainvoke(
        {"messages": [{"role": "user", "content": task}]}, {"recursion_limit": 10_000}
    )
    wall = time.perf_counter() - started
    messages = state["messages"]
    tool_texts = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
    result_file = state.get("files", {}).get(scenarios.RESULT_FILE)
    return Run(
        wall,
        clock,
        steps=sum(1 for m in messages if isinstance(m, AIMessage)),
        file_text=result_file["content"] if result_file else None,
        answer=str(messages[-1].content),
        tool_text=tool_texts[-1] if tool_texts else None,
    )


def _fresh_run(task: str, backend: Any = None) -> Run:
    """`task` run to its end by a new agent with a new clock."""
    clock = ModelClock()
    return asyncio.run(_run(_agent(_chat_model(clock), backend), clock, task))


def _count(steps: int) -> Run:
    return _fresh_run(f"count {steps}")


def _steps(steps: int, repeat: int) -> dict[str, Any]:
    return scenarios.steps_scenario(_count, steps, repeat)


def _construction(repeat: int) -> dict[str, Any]:
    import deepagents  # noqa: F401

    model = _chat_model(ModelClock())
    return scenarios.construction_scenario(lambda: _agent(model), repeat)


def _prompt() -> dict[str, Any]:
    from langchain_core.messages import SystemMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    clock = ModelClock()
    model = _chat_model(clock)
    asyncio.run(_run(_agent(model, todos=True), clock, "count 2"))
    system = "".join(
        m.text if hasattr(m, "text") else str(m.content)
        for m in model.seen
        if isinstance(m, SystemMessage)
    )
    tools = {}
    for bound in model.bound:
        function = convert_to_openai_tool(bound)["function"]
        tools[function["name"]] = len(json.dumps(function))
    return {"system_chars": len(system), "tool_chars": tools, "system_prompt": system}


def _many(agents: int, steps: int) -> tuple[list[Run], ModelClock]:
    clock = ModelClock()
    agent = _agent(_chat_model(clock))

    async def go() -> list[Run]:
        return list(
            await asyncio.gather(*(_run(agent, clock, f"count {steps}") for _ in range(agents)))
        )

    return asyncio.run(go()), clock


def _search(tree: str, expected: int, repeat: int, task: str) -> dict[str, Any]:
    from deepagents.backends import FilesystemBackend

    backend = FilesystemBackend(root_dir=tree, virtual_mode=True)
    return scenarios.search_scenario(lambda task: _fresh_run(task, backend), expected, repeat, task)


SIDE = {
    "import": _cold_import,
    "construction": _construction,
    "prompt": _prompt,
    "steps": _steps,
    "memory": lambda steps: scenarios.memory_scenario(_count, steps),
    "concurrency": lambda agents, steps: scenarios.concurrency_scenario(_many, agents, steps),
    "task": lambda repeat: scenarios.task_scenario(_fresh_run, repeat),
    "search": _search,
}

if __name__ == "__main__":
    scenarios.serve(SIDE)
