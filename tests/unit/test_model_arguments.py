"""Tools whose arguments are a pydantic model are judged by that model, with its coercion."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.tools import StructuredTool, tool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field, SecretStr, field_validator

from agentloop import ModelOptions, create_tool_loop
from agentloop.governance.policy import resolve_policy
from agentloop.governance.spec import ToolSpec
from agentloop.testing import ScriptedChatModel, plan_reply


class Window(BaseModel):
    start: int
    end: int = 10


class Query(BaseModel):
    city: str
    days: int = 1
    metric: bool = False
    window: Window | None = None
    tags: list[str] = Field(default_factory=list)

    @field_validator("city")
    @classmethod
    def _title(cls, value: str) -> str:
        return value.strip().title()


def _weather(**kwargs: Any) -> str:
    return f"{kwargs['city']} for {kwargs['days']} days"


WEATHER = StructuredTool.from_function(
    _weather, name="weather", description="Weather.", args_schema=Query
)


def check(kwargs: Any, the_tool: Any = WEATHER) -> Any:
    validated, _ = ToolSpec.compile(the_tool, resolve_policy(the_tool)).check(kwargs)
    return validated


def test_pydantic_coercion_and_validators_shape_the_arguments_and_are_noted() -> None:
    result = check({"city": " oslo ", "days": "3", "metric": "on"})
    assert result.ok, result.error_message()
    assert result.arguments == {
        "city": "Oslo",
        "days": 3,
        "metric": True,
        "window": None,
        "tags": [],
    }
    assert result.coercions == (
        "city: ' oslo ' -> 'Oslo'",
        "days: '3' -> 3",
        "metric: 'on' -> True",
    )


def test_what_models_mis_send_is_repaired_where_pydantic_refused_it() -> None:
    result = check({"city": "Oslo", "window": '{"start": "2"}', "tags": "rain", "days": None})
    assert result.ok, result.error_message()
    assert result.arguments["window"] == {"start": 2, "end": 10}
    assert result.arguments["tags"] == ["rain"] and result.arguments["days"] == 1
    assert "tags: 'rain' -> ['rain']" in result.coercions
    assert "days: None -> 1" in result.coercions


def test_errors_name_the_argument_and_what_is_expected() -> None:
    sent = {"city": "", "days": "many", "window": {"end": 3}, "tags": {"x": 1}, "when": 1}
    result = check(sent)
    assert not result.ok
    by_argument = {error.argument: error.message for error in result.errors}
    assert by_argument["city"] == "missing required argument"
    assert by_argument["days"].startswith("Input should be a valid integer")
    assert by_argument["days"].endswith("got 'many'")
    assert by_argument["window"] == "missing field 'start'"
    assert by_argument["tags"] == "Input should be a valid list, got {'x': 1}"  # as sent
    assert by_argument["when"].startswith("unknown argument; accepted arguments: city, days")
    assert result.arguments["days"] == "many"  # as sent


def test_injected_arguments_stay_out_and_a_lossy_dump_keeps_the_values_as_sent() -> None:
    @tool
    def whoami(name: str, loud: bool, runtime: ToolRuntime) -> str:
        """Say who."""
        return name

    result = check({"name": "Ada", "loud": "on"}, whoami)
    assert result.ok and result.arguments == {"name": "Ada", "loud": True}

    class Login(BaseModel):
        token: SecretStr
        loud: bool = False
        fallback: SecretStr = SecretStr("spare")

    login = StructuredTool.from_function(
        lambda token, loud=False: "ok", name="login", description="Log in.", args_schema=Login
    )
    secret = check({"token": "s3cret", "loud": "on"}, login)  # the dump would mask secrets
    assert secret.ok and secret.arguments == {"token": "s3cret", "loud": "on"}
    assert "**********" not in repr(secret)


async def test_a_run_records_what_pydantic_made_of_the_arguments(run_loop: Any) -> None:
    seen: list[tuple[str, int]] = []

    @tool
    def forecast(city: Annotated[str, Field(min_length=2)], days: int = 1) -> str:
        """Forecast."""
        seen.append((city, days))
        return f"{city}: sunny"

    commands = [
        {"purpose": "", "tool_name": "forecast", "tool_kwargs": {"city": "Oslo", "days": 2.0}},
        {"purpose": "", "tool_name": "forecast", "tool_kwargs": {"city": "X"}},
    ]
    plans = [plan_reply("execute", commands), plan_reply("response")]
    graph = create_tool_loop(
        ScriptedChatModel(plans),
        [forecast],
        models=ModelOptions(answer_model=ScriptedChatModel(["ok"], repeat_last=True)),
    )
    out = await run_loop(graph, {"user_input": "go"})
    good, short_name = out["tool_logs"]
    assert good["success"] and good["kwargs"] == {"city": "Oslo", "days": 2}
    assert "days: 2.0 -> 2" in good["notes"]
    assert short_name["error_type"] == "invalid_arguments"
    assert "city: String should have at least 2 characters, got 'X'" in short_name["error"]
    assert seen == [("Oslo", 2)]
