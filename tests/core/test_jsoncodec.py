"""JSON as the hub reads it: every number that JSON cannot carry is refused where it is parsed."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elicithub.core import jsoncodec


@st.composite
def overflowing_literals(draw: st.DrawFn) -> str:
    """Number literals that JSON's grammar allows and that overflow a double: 1e999, -12.5E+400, 9...9.0 (309+)."""
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(st.from_regex(r"[1-9][0-9]{0,30}", fullmatch=True))
    fraction = draw(st.sampled_from(["", ".0", ".5", ".123456789"]))
    with_exponent = f"{whole}{fraction}{draw(st.sampled_from(['e', 'E', 'e+', 'E+']))}"
    exponent = draw(st.integers(309 - (len(whole) - 1), 10**6))
    long_whole = "9" * draw(st.integers(310, 400)) + ".0"
    return sign + draw(st.sampled_from([f"{with_exponent}{exponent}", long_whole]))


@given(overflowing_literals())
def test_a_literal_that_overflows_is_refused_wherever_it_stands(literal: str) -> None:
    assert math.isinf(json.loads(literal))  # what the standard parser would have let through
    for text in (literal, f'{{"name": {literal}}}', f'{{"a": [1, {{"b": {literal}}}]}}'):
        with pytest.raises(jsoncodec.BadNumber, match="overflows to infinity"):
            jsoncodec.loads(text)


@given(st.floats(allow_nan=False, allow_infinity=False) | st.integers())
def test_every_finite_number_reads_back_as_itself(number: float) -> None:
    assert jsoncodec.loads(json.dumps({"n": number})) == {"n": number}


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused(token: str) -> None:
    with pytest.raises(jsoncodec.BadNumber, match=f"{token} is not a number JSON can carry"):
        jsoncodec.loads(f'{{"n": [{token}]}}')


def test_an_integer_too_long_to_read_is_refused_not_a_crash() -> None:
    with pytest.raises(jsoncodec.BadNumber, match="5000 digits is too long"):
        jsoncodec.loads('{"n": -' + "1" * 5000 + "}")


def test_bytes_are_read_too_and_syntax_errors_stay_syntax_errors() -> None:
    assert jsoncodec.loads(b'{"a": 1.5e308}') == {"a": 1.5e308}
    with pytest.raises(json.JSONDecodeError):
        jsoncodec.loads("{nope")
