"""Forms built from every kind of flat-schema field, and the browser's check agreeing with the server's."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from elicithub.core.schema import validate_content, validate_requested_schema
from tests.conftest import RunningHub
from tests.web.conftest import OpenPage, in_ten_minutes, render

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 5, "default": "abc"},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "site": {"type": "string", "title": "Website", "format": "uri"},
        "day": {"type": "string", "title": "Day", "format": "date", "default": "2025-01-31"},
        "at": {"type": "string", "title": "Start", "format": "date-time", "default": "2025-01-31T09:00:00Z"},
        "count": {"type": "integer", "title": "Count", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "title": "Ratio", "minimum": 0.5, "maximum": 2.5},
        "ok": {"type": "boolean", "title": "Agree", "default": True},
        "color": {"type": "string", "title": "Color", "enum": ["red", "green"], "enumNames": ["Red", "Green"]},
        "size": {
            "type": "string",
            "title": "Size",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "tags": {
            "type": "array",
            "title": "Tags",
            "items": {"type": "string", "enum": ["a", "b", "c"]},
            "minItems": 1,
            "maxItems": 2,
            "default": ["a"],
        },
        "langs": {
            "type": "array",
            "title": "Languages",
            "items": {"anyOf": [{"const": "py", "title": "Python"}, {"const": "js", "title": "JavaScript"}]},
        },
    },
    "required": ["name", "count", "tags"],
}

VALUES: dict[str, list[Any]] = {
    "name": ["ab", "a", "abcdef", "😀😀", "😀😀😀😀😀😀", 5, ""],
    "email": ["a@b.co", "a@b", "a b@c.de", "@b.co", "a@b..co", "a@b.c"],
    "site": [
        "https://x.example/p?q#f",
        "mailto:a@b",
        "x://h",
        "h:/x",
        "http://",
        "a:",
        "foo",
        "http://x y",
        "http://[::1]/",
        "http://[::1",
        "http://[1.2.3.4]/",
        "1http://x",
        "x:?q",
        "http://[v1.x]/",
    ],
    "day": ["2024-02-29", "2023-02-29", "2023-13-01", "0000-01-01", "2023-1-01", "２０２３-01-01"],
    "at": [
        "2025-01-31T09:00:00Z",
        "2025-01-31t09:00:00.123456789z",
        "2025-01-31T09:00:00+05:30",
        "2025-01-31T24:00:00Z",
        "2025-01-31T23:59:60Z",
        "2025-01-31T09:00:00",
        "2025-01-31T09:00:00+24:00",
        "2025-01-31T09:00:00+05:60",
        "2025-02-30T09:00:00Z",
        "2025-01-31 09:00:00Z",
    ],
    "count": [1, 10, 0, 11, 2.5, 3.0, "3", True],
    "ratio": [0.5, 2.5, 0.49, 3, "1", False],
    "ok": [True, False, "true", 1],
    "color": ["red", "Red", "blue", 1],
    "size": ["s", "Small", "m"],
    "tags": [["a"], ["a", "b"], [], ["a", "b", "c"], ["a", "a"], ["d"], [1], "a"],
    "langs": [["py", "js"], [], ["rust"]],
}


def cases() -> list[Any]:
    base = {"name": "abc", "count": 3, "tags": ["a"]}
    out: list[Any] = [base, {}, None, [], "x", {**base, "extra": 1}, {**base, "name": None}]
    out += [{**base, field: value} for field, values in VALUES.items() for value in values]
    return out


def form_event(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "elicitation-request",
        "elicitationId": "eli_test",
        "mode": "form",
        "message": "Tell us about it",
        "requestedSchema": schema,
        "context": {"trigger": "mcp_elicitation", "serverId": "demo", "toolName": "setup"},
        "expiresAt": in_ten_minutes(),
    }


def test_the_browser_check_gives_exactly_the_servers_errors(hub: RunningHub, open_page: OpenPage) -> None:
    validate_requested_schema(SCHEMA)
    page = open_page(hub)
    contents = cases()
    in_browser = page.evaluate(
        """async ([schema, contents]) => {
            const { validateContent } = await import("./static/schema.js");
            return contents.map((content) => validateContent(schema, content));
        }""",
        [SCHEMA, contents],
    )
    on_server = [[{"field": e.field, "message": e.message} for e in validate_content(SCHEMA, c)] for c in contents]
    for content, browser, server in zip(contents, in_browser, on_server, strict=True):
        assert browser == server, f"content {content!r}"


def test_every_kind_of_field_is_labelled_prefilled_and_checked(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub, timezone_id="Europe/Berlin")
    render(page, form_event(SCHEMA))
    prompt = page.locator(".prompt")
    types = {
        "Name": "text",
        "Email": "email",
        "Website": "url",
        "Day": "date",
        "Start": "datetime-local",
        "Count": "number",
        "Ratio": "number",
        "Agree": "checkbox",
    }
    for label, kind in types.items():
        expect(prompt.get_by_label(label)).to_have_attribute("type", kind)
    count = prompt.get_by_label("Count")
    expect(count).to_have_attribute("min", "1")
    expect(count).to_have_attribute("max", "10")
    expect(count).to_have_attribute("step", "1")
    expect(prompt.get_by_label("Ratio")).to_have_attribute("step", "any")
    unlabelled = page.evaluate(
        "[...document.querySelectorAll('.prompt input, .prompt select')].filter((e) => e.labels.length === 0).length"
    )
    assert unlabelled == 0
    for required in ("Name", "Count"):
        expect(prompt.get_by_label(required)).to_have_attribute("aria-required", "true")
    expect(prompt.locator("legend", has_text="Tags")).to_contain_text("(required)")
    # Defaults, with the date-time shown in the person's own time zone.
    expect(prompt.get_by_label("Name")).to_have_value("abc")
    expect(prompt.get_by_label("Day")).to_have_value("2025-01-31")
    expect(prompt.get_by_label("Start")).to_have_value("2025-01-31T10:00")
    expect(prompt.get_by_label("Agree")).to_be_checked()
    expect(prompt.get_by_label("a", exact=True)).to_be_checked()
    expect(prompt.get_by_label("Color")).to_have_value("")

    prompt.get_by_label("Email").fill("not-an-email")
    prompt.get_by_label("Count").fill("11")
    prompt.get_by_label("c", exact=True).check()
    prompt.get_by_label("b", exact=True).check()
    prompt.get_by_role("button", name="Submit").click()
    errors = {
        "Email": "must be a valid email address",
        "Count": "must be at most 10",
    }
    for label, message in errors.items():
        field = prompt.locator(".field", has=page.get_by_label(label))
        expect(field.locator(".field-error")).to_have_text(message)
    expect(prompt.locator("fieldset", has_text="Tags").locator(".field-error")).to_have_text(
        "must have at most 2 items"
    )
    assert page.evaluate("window.__sent") == []

    prompt.get_by_label("Email").fill("ada@example.org")
    prompt.get_by_label("b", exact=True).uncheck()
    prompt.get_by_label("Color").select_option(label="Green")
    prompt.get_by_label("Python").check()
    prompt.get_by_label("Count").fill("7")
    prompt.get_by_label("Count").press("Enter")  # keyboard submit
    expect(prompt).to_have_attribute("data-state", "accepted")
    assert page.evaluate("window.__sent") == [
        {
            "action": "accept",
            "content": {
                "name": "abc",
                "email": "ada@example.org",
                "day": "2025-01-31",
                "at": "2025-01-31T09:00:00Z",
                "count": 7,
                "ok": True,
                "color": "green",
                "tags": ["a", "c"],
                "langs": ["py"],
            },
        }
    ]
    for control in prompt.locator("input, select, button").all():
        expect(control).to_be_disabled()
    expect(prompt.locator(".field-error:visible")).to_have_count(0)
