"""The runner against real SDK servers: both eras, over streamable HTTP and stdio, and the ways a test fails."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import McpProcess, RunningHub
from tests.testing.conftest import DEPLOY_STDIO, LEGACY_STDIO, SuiteFactory, run_suite


def test_a_2026_server_over_http_is_answered_by_input_request_key(
    mrtr_server: McpProcess, write_suite: SuiteFactory
) -> None:
    path = write_suite(
        f"url: {mrtr_server.url}",
        """
        - name: provision
          call: {tool: provision, arguments: {name: orders}}
          inputResponses:
            region: {action: accept, content: {region: eu-west-1}}
          expect:
            text_equals: Provisioned orders in eu-west-1.
            is_error: false
            rounds: 1
            questions: [{key: region, mode: form, message: "Which region should orders live in?"}]
        - name: two questions in one round
          call: {tool: deploy, arguments: {name: api}}
          inputResponses:
            confirm: {content: {confirm: true}}
            region: {content: {region: us-east-1}}
          expect: {text_equals: Deployed api to us-east-1., questions: [{key: region}, {key: confirm}]}
        """,
    )
    outcomes = run_suite(path)
    assert [o.failures for o in outcomes] == [[], []]
    assert [o.rounds for o in outcomes] == [1, 1]


def test_a_2025_server_over_http_takes_fixtures_in_order(legacy_server: McpProcess, write_suite: SuiteFactory) -> None:
    path = write_suite(
        f"url: {legacy_server.url}, protocol: legacy",
        """
        - name: provision
          call: {tool: provision, arguments: {name: orders}}
          inputResponses:
            first: {content: {region: us-east-1}}
          expect: {text_equals: Provisioned orders in us-east-1., rounds: 1, questions: [{key: first, mode: form}]}
        """,
    )
    [outcome] = run_suite(path)
    assert outcome.failures == []


def test_a_2025_server_over_stdio_picks_the_fixture_whose_match_fits(write_suite: SuiteFactory) -> None:
    path = write_suite(
        f"{LEGACY_STDIO}, protocol: legacy",
        """
        - name: provision
          call: {tool: provision, arguments: {name: billing}}
          inputResponses:
            other: {action: decline, match: {message_contains: nothing like it}}
            billing: {content: {region: eu-west-1}, match: {message_contains: billing}}
          expect: {text_contains: eu-west-1, questions: [{key: billing, message_contains: billing}]}
        - name: structured content is compared as a subset
          call: {tool: echo, arguments: {text: hi}}
          expect: {structured: {result: "echo: hi"}, rounds: 0}
        """,
    )
    assert [o.failures for o in run_suite(path)] == [[], []]


def test_a_2026_server_over_stdio_gets_the_schema_defaults(write_suite: SuiteFactory) -> None:
    path = write_suite(
        DEPLOY_STDIO,
        """
        - name: defaults
          call: {tool: deploy_service, arguments: {service: orders}}
          inputResponses:
            deploy: {content: {region: us-east-1, confirm: true}}
          expect: {text_equals: Deployed orders to us-east-1 with 2 replicas.}
        """,
    )
    [outcome] = run_suite(path)
    assert outcome.failures == []


def test_a_question_without_a_fixture_fails_naming_its_key_and_schema(
    mrtr_server: McpProcess, write_suite: SuiteFactory
) -> None:
    path = write_suite(
        f"url: {mrtr_server.url}",
        """
        - name: unanswered
          call: {tool: provision, arguments: {name: orders}}
        """,
    )
    [outcome] = run_suite(path)
    [failure] = outcome.failures
    assert failure.startswith("no fixture answers question 'region' ('Which region should orders live in?'); schema: ")
    assert '"required": ["region"]' in failure


def test_a_legacy_question_without_a_fixture_fails_naming_it(write_suite: SuiteFactory) -> None:
    path = write_suite(
        f"{LEGACY_STDIO}, protocol: legacy",
        """
        - name: unanswered
          call: {tool: provision, arguments: {name: orders}}
        """,
    )
    [outcome] = run_suite(path)
    [failure] = outcome.failures
    assert failure.startswith("no fixture answers question #1 ('Which region should orders live in?'); schema: ")


def test_a_fixture_that_fails_the_schema_fails_with_the_field_errors(
    mrtr_server: McpProcess, write_suite: SuiteFactory
) -> None:
    path = write_suite(
        f"url: {mrtr_server.url}",
        """
        - name: wrong region
          call: {tool: provision, arguments: {name: orders}}
          inputResponses:
            region: {content: {region: mars-north-1, size: 3}}
        """,
    )
    [outcome] = run_suite(path)
    assert outcome.failures == [
        "the answer to 'region' does not fit its schema: region: must be one of: us-east-1, eu-west-1; "
        "size: is not a field of this form"
    ]


def test_a_server_that_keeps_asking_is_stopped_at_max_rounds(
    mrtr_server: McpProcess, write_suite: SuiteFactory
) -> None:
    path = write_suite(
        f"url: {mrtr_server.url}",
        """
        - name: forever
          call: {tool: forever}
        """,
        head="max_rounds: 3\n",
    )
    [outcome] = run_suite(path)
    assert outcome.failures == ["the server kept asking for more than 3 rounds"]


def test_a_half_shaped_input_required_result_is_an_ordinary_result(
    mrtr_server: McpProcess, write_suite: SuiteFactory
) -> None:
    # `later` answers with a requestState and no inputRequests: by the recognition rule, not a round.
    path = write_suite(
        f"url: {mrtr_server.url}",
        """
        - name: state only
          call: {tool: later}
          expect: {text_contains: Done}
        """,
    )
    [outcome] = run_suite(path)
    assert outcome.rounds == 0
    assert outcome.failures[0].startswith("the server returned a half-shaped InputRequiredResult")
    assert outcome.failures[1] == "text does not contain 'Done'; it is ''"


def test_each_expectation_that_does_not_hold_is_reported(mrtr_server: McpProcess, write_suite: SuiteFactory) -> None:
    path = write_suite(
        f"url: {mrtr_server.url}",
        """
        - name: all wrong
          call: {tool: provision, arguments: {name: orders}}
          inputResponses:
            region: {action: decline}
          expect:
            text_contains: [Provisioned]
            text_equals: nope
            is_error: false
            rounds: 2
            structured: {a: 1}
            questions: [{key: size, mode: url, message: "Which size?", message_contains: size}]
        """,
    )
    [outcome] = run_suite(path)
    text = "Provisioning of orders stopped: the user chose decline."
    assert outcome.failures == [
        f"text does not contain 'Provisioned'; it is {text!r}",
        f"text is {text!r}, expected 'nope'",
        f"is_error is True, expected False (text: {text!r})",
        "the server asked in 1 round(s), expected 2",
        "structured is not an object; structuredContent is null",
        "question 1 has key 'region', expected 'size'",
        "question 1 is a form question, expected url",
        "question 1 asks 'Which region should orders live in?', expected 'Which size?'",
        "question 1 asks 'Which region should orders live in?', which does not contain 'size'",
    ]


def test_a_server_that_cannot_be_reached_fails_the_test(write_suite: SuiteFactory) -> None:
    path = write_suite(
        "command: [python, -c, 'import sys; sys.exit(3)']",
        """
        - name: nobody home
          call: {tool: x}
        """,
    )
    [outcome] = run_suite(path)
    assert outcome.failures == ["the connection to the server closed before the call finished (did the server start?)"]


NAGGING = """
from pydantic import BaseModel
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("nagging")


class Sure(BaseModel):
    ok: bool


@server.tool()
async def nag(ctx: Context) -> str:
    for n in range(10):
        await ctx.elicit(f"Sure ({n})?", Sure)
    return "done"


@server.tool()
async def sign_in(ctx: Context) -> str:
    result = await ctx.elicit_url("Sign in to Example", "https://example.com/sign-in", "sign-in-1")
    return f"sign-in {result.action}"


server.run("stdio")
"""


def test_a_2025_server_that_keeps_asking_is_stopped_at_max_rounds(write_suite: SuiteFactory, tmp_path: Path) -> None:
    (tmp_path / "nagging.py").write_text(NAGGING)
    path = write_suite(
        "command: [python, nagging.py], protocol: legacy",
        """
        - name: nag
          call: {tool: nag}
          inputResponses:
            a: {content: {ok: true}}
            b: {content: {ok: true}}
            c: {content: {ok: true}}
        """,
        head="max_rounds: 2\n",
    )
    [outcome] = run_suite(path)
    assert outcome.failures == ["the server kept asking for more than 2 rounds"]
    assert [q.key for q in outcome.asked] == ["a", "b"]


def test_a_2025_url_question_is_answered_by_its_fixture(write_suite: SuiteFactory, tmp_path: Path) -> None:
    (tmp_path / "nagging.py").write_text(NAGGING)
    path = write_suite(
        "command: [python, nagging.py], protocol: legacy",
        """
        - name: sign in
          call: {tool: sign_in}
          inputResponses:
            sign-in: {action: accept}
          expect: {text_equals: sign-in accept, questions: [{key: sign-in, mode: url, message: Sign in to Example}]}
        """,
    )
    [outcome] = run_suite(path)
    assert outcome.failures == []


def test_a_sampling_request_fails_the_test_naming_it(mrtr_server: McpProcess, write_suite: SuiteFactory) -> None:
    path = write_suite(
        f"url: {mrtr_server.url}",
        """
        - name: summarize
          call: {tool: summarize}
        """,
    )
    [outcome] = run_suite(path)
    assert outcome.failures == ["input request 'draft' is sampling/createMessage, which the test runner cannot answer"]


def test_a_server_that_never_answers_fails_at_the_suite_timeout(write_suite: SuiteFactory) -> None:
    path = write_suite(
        "command: [python, -c, 'import time; time.sleep(600)']",
        """
        - name: silent
          call: {tool: x}
        """,
        head="timeout_s: 0.5\n",
    )
    [outcome] = run_suite(path)
    assert outcome.failures == ["the test did not finish within 0.5 s (timeout_s)"]


def test_headers_reach_an_http_server_such_as_the_hub_itself(hub: RunningHub, write_suite: SuiteFactory) -> None:
    tests = """
    - name: the hub's agent asks on the way
      call: {tool: assistant, arguments: {message: '/call mrtr.provision {"name": "orders"}'}}
      inputResponses:
        region: {content: {region: eu-west-1}}
      expect: {text_equals: Provisioned orders in eu-west-1., questions: [{key: region, mode: form}]}
    """
    signed_in = write_suite(
        f"url: {hub.url}/mcp, protocol: legacy, headers: {{authorization: Bearer alice-secret}}", tests
    )
    assert [o.failures for o in run_suite(signed_in)] == [[]]
    [anonymous] = run_suite(write_suite(f"url: {hub.url}/mcp, protocol: legacy", tests))
    assert anonymous.failures == [
        "the server answered HTTP 401 (does it need a token in the suite's server headers:?): "
        "Server returned an error response"
    ]
