"""Settings layering and the approval gates the command builds from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.cli._config import load
from tether.cli._trust import describe, needs_trust
from tether.errors import ConfigurationError


def test_paths_in_settings_must_be_absolute(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"safe_paths \(flag --safe\).*'/notes/\*\*'"):
        load(tmp_path, {}, {"safe_paths": ["notes/**"]})
    with pytest.raises(ConfigurationError, match="unknown setting 'colour'"):
        load(tmp_path, {}, {"colour": "red"})


def test_a_flag_beats_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    (tmp_path / "tether.toml").write_text("max_steps = 5\ntimeout = 60\n")
    loaded = load(tmp_path, {"TETHER_MAX_STEPS": "6", "TETHER_TIMEOUT": "70"}, {"timeout": 80.0})
    assert loaded.settings.max_steps == 6
    assert loaded.settings.timeout == 80.0
    assert loaded.sources["max_steps"] == "env TETHER_MAX_STEPS"
    assert loaded.sources["timeout"] == "flag --timeout"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('model = "bogus"', "model (tether.toml): cannot tell the provider of model 'bogus'"),
        ('model = "mistral:large"', "unknown model provider 'mistral'"),
        ('checkpointer = "mysql://x"', "'mysql://x' is no database tether keeps threads in"),
        (
            'sandbox = "yes"',
            """sandbox (tether.toml) must be true, false, "auto" or "container", got 'yes'""",
        ),
        ("network = 1", "network (tether.toml) must be true or false, got 1"),
    ],
)
def test_config_refuses_what_a_run_could_not_use(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "tether.toml").write_text(text + "\n")
    with pytest.raises(ConfigurationError) as caught:
        load(tmp_path, {}, {})
    assert said in str(caught.value)
    assert "Value error" not in str(caught.value)


@pytest.mark.parametrize(
    ("word", "value"), [("1", True), ("YES", True), ("off", False), ("auto", "auto")]
)
def test_the_sandbox_variable_takes_the_usual_words(
    tmp_path: Path, word: str, value: object
) -> None:
    assert load(tmp_path, {"TETHER_SANDBOX": word}, {}).settings.sandbox == value
    with pytest.raises(ConfigurationError, match="env TETHER_SANDBOX"):
        load(tmp_path, {"TETHER_SANDBOX": "maybe"}, {})


def test_the_users_own_file_sits_under_the_projects(tmp_path: Path) -> None:
    mine = tmp_path / "config" / "tether" / "config.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text('model = "anthropic:claude-sonnet-4-5"\nmax_steps = 9\nmode = "accept-edits"\n')
    project = tmp_path / "project"
    project.mkdir()
    (project / "tether.toml").write_text("max_steps = 5\n")
    loaded = load(project, {"XDG_CONFIG_HOME": str(tmp_path / "config")}, {})
    assert loaded.settings.model == "anthropic:claude-sonnet-4-5"
    assert loaded.sources["model"] == f"user config {mine}"
    assert loaded.settings.max_steps == 5  # the project's file comes after the user's
    assert loaded.settings.mode == "accept-edits"  # the user's own: no trust asked
    assert needs_trust(loaded) == {}
    mine.write_text("max_steps = [")
    with pytest.raises(ConfigurationError, match=r"cannot read .*config.toml"):
        load(project, {"XDG_CONFIG_HOME": str(tmp_path / "config")}, {})


def test_base_url_asks_an_openai_compatible_server(tmp_path: Path) -> None:
    from tether.cli._agent import _model
    from tether.models.openai import OpenAIModel

    flags = {"base_url": "http://127.0.0.1:9/v1", "model": "openai-chat:qwen3"}
    loaded = load(tmp_path, {}, flags)
    model = _model("openai-chat:qwen3", loaded)
    assert isinstance(model, OpenAIModel)
    assert model.name == "qwen3"
    with pytest.raises(ConfigurationError, match=r"base_url \(flag --base-url\) .* not a local:"):
        _model("local:smollm2", loaded)
    (tmp_path / "tether.toml").write_text('base_url = "https://collector.example/v1"\n')
    assert "sends the model's requests (and your API key) to https://collector.example/v1" in (
        describe(needs_trust(load(tmp_path, {}, {})))
    )
