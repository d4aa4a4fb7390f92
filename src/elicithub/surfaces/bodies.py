"""The bodies the chat and answer endpoints take: validated by `server/chat_routes.py`, documented by
`server/openapi.py`."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, ValidationError

from elicithub.core.ids import CONVERSATION_ID_PATTERN
from elicithub.core.jsoncodec import JsonObject

# Documented, not enforced here: Conversations refuses any other id with 400.
ID: dict[str, JsonValue] = {"pattern": CONVERSATION_ID_PATTERN}

Model = TypeVar("Model", bound=BaseModel)


class ElicitationResponse(BaseModel):
    """An answer, as POSTed to /run/api/elicitation-responses or sent as a chat message part."""

    model_config = ConfigDict(extra="ignore")

    conversationId: str | None = None
    elicitationId: str = Field(min_length=1)
    action: Literal["accept", "decline", "cancel"]
    content: JsonObject | None = None


class ResponseBody(ElicitationResponse):
    conversationId: str | None = Field(
        None, min_length=1, description="The question's conversation; an approval's approvers may leave it out."
    )


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[JsonObject] | JsonObject | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = Field(
        default=False, description="Add a last chunk (`choices: []`) with the tokens the run's model requests used."
    )


class ChatCompletionsBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1, description="The last message must be the user's.")
    stream: Literal[True] = Field(description="This endpoint only streams.")
    stream_options: StreamOptions | None = None


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | None = None
    role: Literal["system", "user", "assistant"]
    parts: list[JsonObject] = []


class UIChatBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(
        min_length=1, description="The conversation: 1-128 characters of A-Z a-z 0-9 . _ ~ -", json_schema_extra=ID
    )
    messages: list[UIMessage] = Field(
        min_length=1,
        description="The last message must be the user's; with `ui_stream.native_approvals`, it may be the assistant"
        " message whose tool part is `approval-responded` (the answer to that approval).",
    )
    agent: str | None = Field(None, description="Which agent answers (config agents:); default the first.")


def field_name(loc: tuple[Any, ...]) -> str:
    """A validation error's location as error messages name it (`body` for the body as a whole)."""
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


class Body(Generic[Model]):
    """One body model's validator, built once: what FastAPI checks of a JSON body, without its per-request
    dependency solving. A body that does not fit is a 422 naming each field, worded as FastAPI words it."""

    def __init__(self, model: type[Model]) -> None:
        self._adapter = TypeAdapter(model)

    def validate(self, value: Any, what: str = "") -> Model:
        try:
            # from_attributes, as FastAPI validates bodies: the same message for a body that is no object.
            return self._adapter.validate_python(value, from_attributes=True)
        except ValidationError as exc:
            problems = "; ".join(f"{field_name(tuple(e['loc']))}: {e['msg']}" for e in exc.errors())
            raise HTTPException(422, what + problems) from None
