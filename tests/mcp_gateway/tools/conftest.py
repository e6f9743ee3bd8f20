import json

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from jsonschema import Draft202012Validator

from mcp_gateway.principal import Principal
from mcp_gateway.tools import TOOLS, call_tool
from tests.factories import UserFactory


@pytest.fixture(autouse=True)
async def _close_worker_connections(anyio_backend):
    """Tools reach the database from asgiref's thread-sensitive worker; close its connection so
    the test database can be flushed and dropped."""
    yield
    await sync_to_async(connections.close_all, thread_sensitive=True)()


# Lines the tool-selection eval reports; printed in the terminal summary so CI logs show them.
EVAL_SUMMARY: list[str] = []


def pytest_terminal_summary(terminalreporter):
    for line in EVAL_SUMMARY:
        terminalreporter.write_line(line)


OUTPUT_VALIDATORS = {spec.name: Draft202012Validator(spec.output_schema) for spec in TOOLS}


@pytest.fixture
def owner(transactional_db):
    return UserFactory()


@pytest.fixture
def stranger(transactional_db):
    return UserFactory()


def principal_for(user, scopes=("memory:read", "memory:write")) -> Principal:
    return Principal(user_id=user.pk, scopes=frozenset(scopes))


@pytest.fixture
def agent(owner):
    return principal_for(owner)


@pytest.fixture
def other_agent(stranger):
    return principal_for(stranger)


async def ok(principal, name, arguments=None) -> dict:
    """Call a tool that must succeed; return its structured result (checked against the text)."""
    result = await call_tool(principal, name, arguments or {})
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    OUTPUT_VALIDATORS[name].validate(result.structured_content)
    return result.structured_content


async def fails(principal, name, arguments=None) -> str:
    """Call a tool that must fail; return the error text."""
    result = await call_tool(principal, name, arguments or {})
    assert result.is_error, result.structured_content
    assert result.structured_content is None
    return result.content[0].text
