"""Tests for elicitation requestedSchema validation and content validation."""

from __future__ import annotations

import math
from datetime import timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# The SDK gates its own rendered schemas with this private model; used here only to check interoperability.
from mcp_types._v2025_11_25 import PrimitiveSchemaDefinition
from pydantic import TypeAdapter

from elicithub.core.schema import (
    FieldError,
    SchemaError,
    apply_defaults,
    validate_content,
    validate_requested_schema,
)

PROPERTY_TYPES = ("string", "number", "integer", "boolean", "array")
SDK_PROPERTY = TypeAdapter[Any](PrimitiveSchemaDefinition)


def form(required: list[str] | None = None, **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def schema_error(schema: Any) -> str:
    with pytest.raises(SchemaError) as excinfo:
        validate_requested_schema(schema)
    return str(excinfo.value)


def errors_for(prop: dict[str, Any], value: Any) -> list[FieldError]:
    return validate_content(form(f=prop), {"f": value})


def message_for(prop: dict[str, Any], value: Any) -> str | None:
    errors = errors_for(prop, value)
    assert len(errors) <= 1
    return errors[0].message if errors else None


# --- accepted schemas -------------------------------------------------------------------------------------------

ACCEPTED_PROPERTIES = {
    "plain string": {"type": "string"},
    "string with everything": {
        "type": "string",
        "title": "Name",
        "description": "Your name",
        "minLength": 1,
        "maxLength": 10,
        "default": "Ada",
    },
    "email": {"type": "string", "format": "email", "default": "ada@example.com"},
    "uri": {"type": "string", "format": "uri", "default": "https://example.com/x"},
    "date": {"type": "string", "format": "date", "default": "2025-11-25"},
    "date-time": {"type": "string", "format": "date-time", "default": "2025-11-25T10:00:00Z"},
    "untitled single-select": {"type": "string", "enum": ["us", "eu"], "default": "eu"},
    "legacy single-select with enumNames": {"type": "string", "enum": ["us", "eu"], "enumNames": ["US", "Europe"]},
    "titled single-select": {
        "type": "string",
        "oneOf": [{"const": "us", "title": "United States"}, {"const": "eu", "title": "Europe"}],
        "default": "us",
    },
    "number": {"type": "number", "minimum": -1.5, "maximum": 2.5, "default": 0.25},
    "integer": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
    "integer with integral float default": {"type": "integer", "default": 3.0},
    "equal bounds": {"type": "number", "minimum": 2, "maximum": 2},
    "boolean": {"type": "boolean", "title": "Agree?", "default": False},
    "untitled multi-select": {
        "type": "array",
        "items": {"type": "string", "enum": ["a", "b", "c"]},
        "minItems": 1,
        "maxItems": 2,
        "default": ["a", "c"],
    },
    "titled multi-select": {
        "type": "array",
        "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b", "title": "B"}]},
        "default": [],
    },
    "titled multi-select with item type": {
        "type": "array",
        "items": {"type": "string", "anyOf": [{"const": "a", "title": "A"}]},
    },
    "null keywords count as absent": {"type": "string", "title": None, "minLength": None, "format": None},
    "unknown keywords are ignored": {"type": "string", "x-widget": "textarea", "examples": ["x"]},
}


@pytest.mark.parametrize("prop", ACCEPTED_PROPERTIES.values(), ids=ACCEPTED_PROPERTIES.keys())
def test_each_supported_property_kind_is_accepted(prop: dict[str, Any]) -> None:
    validate_requested_schema(form(required=["f"], f=prop))


def test_top_level_title_description_and_schema_keys_are_allowed() -> None:
    schema = form(name={"type": "string"})
    schema.update({"title": "Contact", "description": "Who are you?", "$schema": "https://json-schema.org/x"})
    validate_requested_schema(schema)


def test_schema_without_properties_entries_or_required_is_accepted() -> None:
    validate_requested_schema({"type": "object", "properties": {}})
    validate_requested_schema({"type": "object", "properties": {}, "required": None})


# --- rejected schemas -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", [None, [], "object", 3])
def test_non_mapping_schema_is_rejected(schema: Any) -> None:
    assert schema_error(schema) == "requestedSchema must be an object"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"properties": {}}, 'requestedSchema: type must be "object"'),
        ({"type": "array", "properties": {}}, 'requestedSchema: type must be "object"'),
        ({"type": "object"}, "requestedSchema: properties must be an object"),
        ({"type": "object", "properties": []}, "requestedSchema: properties must be an object"),
        ({"type": "object", "properties": {}, "title": 3}, "requestedSchema: title must be a string"),
        ({"type": "object", "properties": {"": {"type": "string"}}}, "property names must be non-empty"),
        ({"type": "object", "properties": {}, "required": "a"}, "required must be a list of property names"),
        ({"type": "object", "properties": {}, "required": ["a"]}, "property 'a': listed in required but not"),
        (form(["a", "a"], a={"type": "string"}), "property 'a': listed in required more than once"),
        ({"type": "object", "properties": {}, "$ref": "#/x"}, "requestedSchema: $ref is not allowed"),
        ({"type": "object", "properties": {}, "$defs": {"x": {"$ref": "#"}}}, "$ref is not allowed"),
    ],
)
def test_malformed_top_level_is_rejected_with_a_clear_message(schema: dict[str, Any], expected: str) -> None:
    assert expected in schema_error(schema)


REJECTED_PROPERTIES = {
    "nested object": ({"type": "object", "properties": {"street": {"type": "string"}}}, "nested objects are not"),
    "definition not an object": ("string", "definition must be an object"),
    "missing type": ({"enum": ["a"]}, "type is required"),
    "missing type on titled single-select": ({"oneOf": [{"const": "a", "title": "A"}]}, "type is required"),
    "unknown type": ({"type": "date"}, "unknown type 'date'"),
    "type list": ({"type": ["string", "null"]}, "unknown type"),
    "$ref": ({"$ref": "#/$defs/Address"}, "$ref is not allowed"),
    "$ref in items": ({"type": "array", "items": {"$ref": "#/x"}}, "$ref is not allowed"),
    "non-string title": ({"type": "string", "title": 1}, "title must be a string"),
    "array of free strings": ({"type": "array", "items": {"type": "string"}}, "items must be an enum of strings"),
    "array of objects": ({"type": "array", "items": {"type": "object"}}, "items must be an enum of strings"),
    "array without items": ({"type": "array"}, "items must be an enum of strings"),
    "array items with enum and anyOf": (
        {"type": "array", "items": {"enum": ["a"], "anyOf": [{"const": "a", "title": "A"}]}},
        "may only add type",
    ),
    "empty enum": ({"type": "string", "enum": []}, "enum must not be empty"),
    "duplicated enum value": ({"type": "string", "enum": ["a", "b", "a"]}, "enum lists 'a' more than once"),
    "enum of lists": ({"type": "string", "enum": [["a"], ["a"]]}, "enum must be a list of strings"),
    "non-string enum value": ({"type": "string", "enum": ["a", 1]}, "enum must be a list of strings"),
    "enumNames of wrong length": ({"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}, "enumNames must be"),
    "enumNames without enum": ({"type": "string", "enumNames": ["A"]}, "enumNames requires enum"),
    "enum combined with oneOf": (
        {"type": "string", "enum": ["a"], "oneOf": [{"const": "a", "title": "A"}]},
        "enum and oneOf cannot be combined",
    ),
    "enum combined with maxLength": ({"type": "string", "enum": ["a"], "maxLength": 3}, "maxLength cannot be"),
    "oneOf not a list": ({"type": "string", "oneOf": "a"}, "oneOf must be a list of {const, title} objects"),
    "empty oneOf": ({"type": "string", "oneOf": []}, "oneOf must not be empty"),
    "oneOf entry without title": ({"type": "string", "oneOf": [{"const": "a"}]}, "must have a string const and"),
    "duplicated oneOf const": (
        {"type": "string", "oneOf": [{"const": "a", "title": "A"}, {"const": "a", "title": "B"}]},
        "oneOf lists 'a' more than once",
    ),
    "duplicated anyOf const": (
        {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "a", "title": "A"}]}},
        "items.anyOf lists 'a' more than once",
    ),
    "duplicated items enum value": (
        {"type": "array", "items": {"type": "string", "enum": ["a", "a"]}},
        "items.enum lists 'a' more than once",
    ),
    "negative minLength": ({"type": "string", "minLength": -1}, "minLength must be a non-negative integer"),
    "float maxLength": ({"type": "string", "maxLength": 2.0}, "maxLength must be a non-negative integer"),
    "boolean minLength": ({"type": "string", "minLength": True}, "minLength must be a non-negative integer"),
    "minLength above maxLength": ({"type": "string", "minLength": 5, "maxLength": 2}, "must not be greater than"),
    "unsupported format": ({"type": "string", "format": "ipv4"}, "unsupported format 'ipv4'"),
    "minimum above maximum": ({"type": "number", "minimum": 5, "maximum": 1}, "minimum must not be greater than"),
    "NaN minimum": ({"type": "number", "minimum": math.nan}, "minimum must be a finite number"),
    "string maximum": ({"type": "integer", "maximum": "9"}, "maximum must be a finite number"),
    "boolean maximum": ({"type": "number", "maximum": True}, "maximum must be a finite number"),
    "integer range without integers": (
        {"type": "integer", "minimum": 1.2, "maximum": 1.8},
        "no integer lies between minimum and maximum",
    ),
    "minItems above maxItems": (
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 2, "maxItems": 1},
        "minItems must not be greater than maxItems",
    ),
    "minItems above number of choices": (
        {"type": "array", "items": {"type": "string", "enum": ["a"]}, "minItems": 2},
        "minItems is greater than the number of choices",
    ),
    "string default of wrong type": ({"type": "string", "default": 1}, "default must be a string"),
    "string default too long": ({"type": "string", "maxLength": 2, "default": "abc"}, "default must be at most 2"),
    "email default not an email": ({"type": "string", "format": "email", "default": "x"}, "default must be a valid"),
    "enum default not in enum": ({"type": "string", "enum": ["a"], "default": "b"}, "default must be one of: a"),
    "oneOf default not a const": (
        {"type": "string", "oneOf": [{"const": "a", "title": "A"}], "default": "A"},
        "default must be one of: a",
    ),
    "number default out of range": ({"type": "number", "maximum": 1, "default": 2}, "default must be at most 1"),
    "integer default not integral": ({"type": "integer", "default": 2.5}, "default must be an integer"),
    "number default boolean": ({"type": "number", "default": True}, "default must be a number"),
    "boolean default string": ({"type": "boolean", "default": "yes"}, "default must be a boolean"),
    "multi-select default not allowed": (
        {"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": ["b"]},
        "default must only contain values from: a",
    ),
    "multi-select default too short": (
        {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 2, "default": ["a"]},
        "default must have at least 2 items",
    ),
}


@pytest.mark.parametrize(("prop", "expected"), REJECTED_PROPERTIES.values(), ids=REJECTED_PROPERTIES.keys())
def test_invalid_property_is_rejected_naming_the_property(prop: Any, expected: str) -> None:
    message = schema_error(form(other={"type": "boolean"}, address=prop))
    assert message.startswith("property 'address': ")
    assert expected in message


def test_nested_object_is_rejected_naming_the_property() -> None:
    schema = form(address={"type": "object", "properties": {"street": {"type": "string"}}})
    assert schema_error(schema) == "property 'address': nested objects are not allowed"


def test_schema_error_is_a_value_error() -> None:
    assert issubclass(SchemaError, ValueError)


# --- content validation -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [None, [], "x", 1])
def test_content_that_is_not_an_object_gives_one_whole_content_error(content: Any) -> None:
    assert validate_content(form(a={"type": "string"}), content) == [FieldError("", "content must be an object")]


def test_valid_content_gives_no_errors() -> None:
    schema = form(["name"], **{k.replace(" ", "_"): v for k, v in ACCEPTED_PROPERTIES.items()}, name={"type": "string"})
    validate_requested_schema(schema)
    content = {name: prop["default"] for name, prop in schema["properties"].items() if "default" in prop}
    assert validate_content(schema, {**content, "name": "Ada"}) == []


def test_missing_or_null_required_property_is_required() -> None:
    schema = form(["a", "b"], a={"type": "string"}, b={"type": "number"}, c={"type": "boolean"})
    assert validate_content(schema, {"b": None}) == [FieldError("a", "is required"), FieldError("b", "is required")]


def test_absent_or_null_optional_property_is_fine() -> None:
    assert validate_content(form(a={"type": "string", "minLength": 3}), {"a": None}) == []
    assert validate_content(form(a={"type": "string", "minLength": 3}), {}) == []


def test_property_not_in_schema_is_not_a_field_of_this_form() -> None:
    errors = validate_content(form(a={"type": "string"}), {"a": "x", "zz": 1})
    assert errors == [FieldError("zz", "is not a field of this form")]


def test_each_field_reports_only_its_first_problem() -> None:
    schema = form(["a"], a={"type": "string"}, n={"type": "integer", "minimum": 5}, s={"type": "string"})
    errors = validate_content(schema, {"n": 1.5, "s": 3, "x": True})
    assert errors == [
        FieldError("a", "is required"),
        FieldError("n", "must be an integer"),
        FieldError("s", "must be a string"),
        FieldError("x", "is not a field of this form"),
    ]


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("string", 1, "must be a string"),
        ("string", ["a"], "must be a string"),
        ("number", "1", "must be a number"),
        ("number", True, "must be a number"),
        ("number", math.nan, "must be a number"),
        ("number", math.inf, "must be a number"),
        ("number", -math.inf, "must be a number"),
        ("integer", 1.5, "must be an integer"),
        ("integer", False, "must be an integer"),
        ("integer", "3", "must be an integer"),
        ("integer", math.nan, "must be an integer"),
        ("boolean", "true", "must be a boolean"),
        ("boolean", 1, "must be a boolean"),
    ],
)
def test_value_of_wrong_type_is_reported(kind: str, value: Any, expected: str) -> None:
    assert message_for({"type": kind}, value) == expected


@pytest.mark.parametrize(("kind", "value"), [("integer", 3.0), ("integer", 10**30), ("number", 3), ("number", 0.5)])
def test_numbers_that_fit_the_type_are_accepted(kind: str, value: Any) -> None:
    assert message_for({"type": kind}, value) is None


@pytest.mark.parametrize(
    ("prop", "value", "expected"),
    [
        ({"minLength": 2}, "a", "must be at least 2 characters"),
        ({"minLength": 1}, "", "must be at least 1 character"),
        ({"maxLength": 3}, "abcd", "must be at most 3 characters"),
        ({"minLength": 2, "maxLength": 3}, "ab", None),
        ({"maxLength": 2}, "é✓", None),
    ],
)
def test_string_length_bounds_are_enforced(prop: dict[str, Any], value: str, expected: str | None) -> None:
    assert message_for({"type": "string", **prop}, value) == expected


FORMAT_CASES = {
    "email": (
        ["ada@example.com", "a.b+c@sub.example.org"],
        ["ada", "ada@", "@example.com", "ada@example", "a b@example.com", "ada@@example.com", "ada@example..com"],
        "must be a valid email address",
    ),
    "uri": (
        ["https://example.com", "http://localhost:8080/x?y=1#z", "mailto:ada@example.com", "urn:isbn:0451450523"],
        ["example.com", "http:", "http://", "/relative/path", "https://exa mple.com", "http://[::1", ""],
        "must be a valid URI",
    ),
    "date": (
        ["2025-11-25", "2024-02-29", "0001-01-01"],
        ["2025-02-30", "2023-02-29", "20251125", "2025-W01-1", "25-11-25", "2025-11-25T00:00:00Z", "２０２５-11-25"],
        "must be a valid date (YYYY-MM-DD)",
    ),
    "date-time": (
        ["2025-11-25T10:00:00Z", "2025-11-25T10:00:00.123+05:30", "2025-11-25t10:00:00z", "2025-11-25T23:59:59-08:00"],
        ["2025-11-25T10:00:00", "2025-11-25", "2025-11-25 10:00:00Z", "2025-11-25T25:00:00Z", "2025-11-25T10:00Z"],
        "must be a valid date-time with a timezone (e.g. 2025-01-31T09:00:00Z)",
    ),
}


@pytest.mark.parametrize(
    ("fmt", "value"), [(fmt, value) for fmt, (good, _, _) in FORMAT_CASES.items() for value in good]
)
def test_values_matching_their_format_are_accepted(fmt: str, value: str) -> None:
    assert message_for({"type": "string", "format": fmt}, value) is None


@pytest.mark.parametrize(
    ("fmt", "value", "expected"),
    [(fmt, value, expected) for fmt, (_, bad, expected) in FORMAT_CASES.items() for value in bad],
)
def test_values_not_matching_their_format_are_reported(fmt: str, value: str, expected: str) -> None:
    assert message_for({"type": "string", "format": fmt}, value) == expected


@pytest.mark.parametrize(
    ("prop", "value", "expected"),
    [
        ({"type": "number", "minimum": 1.5}, 1, "must be at least 1.5"),
        ({"type": "number", "maximum": 10.0}, 10.5, "must be at most 10"),
        ({"type": "integer", "minimum": 0, "maximum": 10}, 11, "must be at most 10"),
        ({"type": "integer", "minimum": 0}, -1.0, "must be at least 0"),
        ({"type": "integer", "minimum": 0, "maximum": 10}, 10, None),
        ({"type": "number", "maximum": 1e300}, 10**400, "must be at most 1e+300"),
    ],
)
def test_number_bounds_are_enforced(prop: dict[str, Any], value: Any, expected: str | None) -> None:
    assert message_for(prop, value) == expected


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "enum": ["us", "eu", "apac"]},
        {"type": "string", "enum": ["us", "eu", "apac"], "enumNames": ["US", "EU", "Asia"]},
        {"type": "string", "oneOf": [{"const": c, "title": c.upper()} for c in ("us", "eu", "apac")]},
    ],
)
def test_single_select_only_accepts_listed_values(prop: dict[str, Any]) -> None:
    assert message_for(prop, "eu") is None
    assert message_for(prop, "EU") == "must be one of: us, eu, apac"
    assert message_for(prop, 1) == "must be a string"


MULTI = {
    "untitled": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2},
    "titled": {
        "type": "array",
        "items": {"anyOf": [{"const": c, "title": c.upper()} for c in "abc"]},
        "minItems": 1,
        "maxItems": 2,
    },
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["a", "c"], None),
        ("a", "must be a list"),
        ({"a": True}, "must be a list"),
        (["a", 1], "must be a list of strings"),
        (["a", "z"], "must only contain values from: a, b, c"),
        (["a", "a"], "must not contain duplicates"),
        ([], "must have at least 1 item"),
        (["a", "b", "c"], "must have at most 2 items"),
    ],
)
@pytest.mark.parametrize("prop", MULTI.values(), ids=MULTI.keys())
def test_multi_select_checks_items_duplicates_and_counts(prop: dict[str, Any], value: Any, expected: str) -> None:
    assert message_for(prop, value) == expected


def test_apply_defaults_fills_absent_and_null_properties_only() -> None:
    schema = form(
        a={"type": "string", "default": "x"},
        b={"type": "integer", "default": 1},
        c={"type": "boolean", "default": False},
        d={"type": "string"},
    )
    content = {"a": "given", "b": None}
    assert apply_defaults(schema, content) == {"a": "given", "b": 1, "c": False}
    assert content == {"a": "given", "b": None}
    assert apply_defaults(schema) == {"a": "x", "b": 1, "c": False}


def test_apply_defaults_copies_list_defaults() -> None:
    schema = form(m={"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["a"]})
    filled = apply_defaults(schema, None)
    filled["m"].append("b")
    assert schema["properties"]["m"]["default"] == ["a"]


# --- property-based ---------------------------------------------------------------------------------------------

short_text = st.text(max_size=8)
words = st.text("abcdefghij", min_size=1, max_size=6)
choice_lists = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=5, unique=True)
offsets = st.integers(-(23 * 60 + 59), 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
FORMAT_VALUES: dict[str, st.SearchStrategy[str]] = {
    "email": st.builds("{}@{}.{}".format, words, words, words),
    "uri": st.one_of(
        st.builds("{}://{}.com/{}".format, st.sampled_from(["http", "https", "ftp"]), words, words),
        st.builds("mailto:{}@{}.org".format, words, words),
    ),
    "date": st.dates().map(lambda d: d.isoformat()),
    "date-time": st.datetimes(timezones=offsets).map(lambda d: d.isoformat().replace("+00:00", "Z")),
}


def valid_values(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = prop["type"]
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        return st.integers(prop.get("minimum"), prop.get("maximum"))
    if kind == "number":
        return st.floats(prop.get("minimum"), prop.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "array":
        items = prop["items"]
        options = items["enum"] if "enum" in items else [option["const"] for option in items["anyOf"]]
        return st.lists(
            st.sampled_from(options),
            unique=True,
            min_size=prop.get("minItems", 0),
            max_size=min(prop.get("maxItems", len(options)), len(options)),
        )
    if "enum" in prop:
        return st.sampled_from(prop["enum"])
    if "oneOf" in prop:
        return st.sampled_from([option["const"] for option in prop["oneOf"]])
    if "format" in prop:
        return FORMAT_VALUES[prop["format"]]
    return st.text(min_size=prop.get("minLength", 0), max_size=prop.get("maxLength", 20))


def optional(draw: st.DrawFn, prop: dict[str, Any], key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        prop[key] = draw(strategy)


def optional_bounds(
    draw: st.DrawFn, prop: dict[str, Any], keys: tuple[str, str], bound: st.SearchStrategy[Any]
) -> None:
    for key, value in zip(keys, sorted(draw(st.lists(bound, min_size=2, max_size=2))), strict=True):
        optional(draw, prop, key, st.just(value))


VARIANT_TYPES = {"text": "string", "format": "string", "enum": "string", "oneOf": "string", "multi": "array"}


@st.composite
def property_schemas(draw: st.DrawFn) -> dict[str, Any]:
    variant = draw(st.sampled_from(["text", "format", "enum", "oneOf", "number", "integer", "boolean", "multi"]))
    prop: dict[str, Any] = {"type": VARIANT_TYPES.get(variant, variant)}
    optional(draw, prop, "title", short_text)
    optional(draw, prop, "description", short_text)
    if variant == "text":
        optional_bounds(draw, prop, ("minLength", "maxLength"), st.integers(0, 12))
    elif variant == "format":
        prop["format"] = draw(st.sampled_from(sorted(FORMAT_VALUES)))
    elif variant == "enum":
        prop["enum"] = draw(choice_lists)
        optional(draw, prop, "enumNames", st.just([value.upper() for value in prop["enum"]]))
    elif variant == "oneOf":
        prop["oneOf"] = [{"const": value, "title": value.title()} for value in draw(choice_lists)]
    elif variant in ("number", "integer"):
        bound = st.integers(-1000, 1000) if variant == "integer" else st.integers(-1000, 1000) | st.floats(-1e6, 1e6)
        optional_bounds(draw, prop, ("minimum", "maximum"), bound)
    elif variant == "multi":
        options = draw(choice_lists)
        if draw(st.booleans()):
            prop["items"] = {"type": "string", "enum": options}
        else:
            prop["items"] = {"anyOf": [{"const": value, "title": value.title()} for value in options]}
        optional_bounds(draw, prop, ("minItems", "maxItems"), st.integers(0, len(options)))
    optional(draw, prop, "default", valid_values(prop))
    return prop


@st.composite
def flat_schemas(draw: st.DrawFn, min_properties: int = 0) -> dict[str, Any]:
    properties = draw(st.dictionaries(st.text(min_size=1, max_size=8), property_schemas(), min_size=min_properties))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required: list[str] = draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
    mention_required = draw(st.booleans())
    if required or mention_required:
        schema["required"] = required
    optional(draw, schema, "title", short_text)
    return schema


@st.composite
def schemas_with_content(draw: st.DrawFn, min_properties: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = draw(flat_schemas(min_properties))
    required = set(schema.get("required", []))
    content = {
        name: draw(valid_values(prop))
        for name, prop in schema["properties"].items()
        if name in required or draw(st.booleans())
    }
    return schema, content


WRONG_TYPES: dict[str, tuple[st.SearchStrategy[Any], str]] = {
    "string": (st.integers() | st.booleans() | st.floats() | st.lists(short_text), "must be a string"),
    "number": (
        short_text | st.booleans() | st.lists(st.integers()) | st.sampled_from([math.nan, math.inf]),
        "must be a number",
    ),
    "integer": (short_text | st.booleans() | st.floats().filter(lambda f: not f.is_integer()), "must be an integer"),
    "boolean": (st.integers() | short_text | st.floats(), "must be a boolean"),
    "array": (short_text | st.integers() | st.dictionaries(short_text, short_text), "must be a list"),
}

KEYWORDS = [
    *PROPERTY_TYPES,
    "object",
    "properties",
    "required",
    "items",
    "enum",
    "enumNames",
    "oneOf",
    "anyOf",
    "const",
    "title",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "format",
    "email",
    "uri",
    "date",
    "date-time",
    "default",
    "$ref",
]
json_keys = st.sampled_from(KEYWORDS) | short_text
# Huge ints overflow float conversion, a classic way for numeric checks to crash.
json_leaves = (
    st.none() | st.booleans() | st.integers() | st.sampled_from([10**400, -(10**400)]) | st.floats() | short_text
)
json_junk = st.recursive(
    json_leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(json_keys, children, max_size=5),
    max_leaves=20,
)
# Leaves half of the time, so that a bad scalar often lands directly on a keyword or a field.
junk_values = json_leaves | json_junk
junk_properties = st.dictionaries(short_text, st.dictionaries(st.sampled_from(KEYWORDS), junk_values))


@st.composite
def mutated_schemas(draw: st.DrawFn) -> Any:
    """A valid schema with one keyword of one property (or of the schema itself) replaced by junk."""
    schema = draw(flat_schemas())
    target = (
        schema["properties"][draw(st.sampled_from(sorted(schema["properties"])))] if schema["properties"] else schema
    )
    if draw(st.booleans()) and "items" in target:
        target = target["items"]
    target[draw(st.sampled_from(sorted(target)) | st.sampled_from(KEYWORDS))] = draw(junk_values)
    return schema


@settings(max_examples=150, deadline=None)
@given(schemas_with_content())
def test_generated_valid_schemas_accept_generated_valid_content(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    schema, content = case
    validate_requested_schema(schema)
    assert validate_content(schema, content) == []
    assert validate_content(schema, apply_defaults(schema, content)) == []


@settings(max_examples=100, deadline=None)
@given(property_schemas())
def test_accepted_property_schemas_are_also_accepted_by_the_sdk_model(prop: dict[str, Any]) -> None:
    SDK_PROPERTY.validate_python(prop)


@settings(max_examples=150, deadline=None)
@given(schemas_with_content(min_properties=1), st.data())
def test_one_value_of_the_wrong_type_gives_exactly_one_error_for_that_field(
    case: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    schema, content = case
    name = data.draw(st.sampled_from(sorted(schema["properties"])))
    wrong_values, expected = WRONG_TYPES[schema["properties"][name]["type"]]
    content[name] = data.draw(wrong_values)
    assert validate_content(schema, content) == [FieldError(name, expected)]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        json_junk,
        mutated_schemas(),
        st.fixed_dictionaries({"type": st.just("object"), "properties": json_junk | junk_properties}),
    )
)
def test_junk_schemas_only_ever_raise_schema_error(schema: Any) -> None:
    try:
        validate_requested_schema(schema)
    except SchemaError:
        return
    # Whatever passes must be usable for content checks without crashing.
    validate_content(schema, {name: None for name in schema["properties"]})
    apply_defaults(schema, {})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_schemas(), st.data())
def test_junk_content_never_raises_and_reports_each_field_at_most_once(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    names = st.sampled_from(sorted(schema["properties"])) | short_text if schema["properties"] else short_text
    content: Any = data.draw(st.dictionaries(names, junk_values, max_size=6) | json_junk)
    errors = validate_content(schema, content)
    assert all(isinstance(error, FieldError) for error in errors)
    assert len({error.field for error in errors}) == len(errors)
    if not isinstance(content, dict):
        assert errors == [FieldError("", "content must be an object")]
