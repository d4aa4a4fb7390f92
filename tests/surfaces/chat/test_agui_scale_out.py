"""AG-UI across two `elicithub serve` processes sharing one store (Redis, then Postgres): a run interrupted on one
hub is resumed on the other, and the resume replayed on the first."""

from __future__ import annotations

from ag_ui.core import BaseEvent, ToolCallResultEvent

from tests.server.test_scale_out import ServedHub, hubs, shared_store_url
from tests.surfaces.chat.agui_stream import interrupts, kinds, resolved, run, run_input

__all__ = ["hubs", "shared_store_url"]  # the two hubs on a shared store, as the scale-out tests start them


def results(events: list[BaseEvent]) -> list[tuple[str, object]]:
    return [(e.tool_call_id, e.content) for e in events if isinstance(e, ToolCallResultEvent)]


def test_an_interrupt_raised_on_one_hub_is_resumed_on_the_other(hubs: tuple[ServedHub, ServedHub]) -> None:
    a, b = hubs
    [asking] = interrupts(run(a, run_input("agui-far", '/call mrtr.provision {"name": "far"}')))
    resume = [resolved(asking.id, {"region": "eu-west-1"})]

    rest = run(b, run_input("agui-far", resume=resume))

    assert "TOOL_CALL_START" not in kinds(rest) and kinds(rest)[-1] == "RUN_FINISHED"
    assert results(rest) == [(asking.tool_call_id, "Provisioned far in eu-west-1.")]
    assert results(run(a, run_input("agui-far", resume=resume))) == results(rest)  # replayed on the first hub
