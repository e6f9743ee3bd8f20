"""Which package may import which: the rooms of the README's layout table, checked on the source.

`threengram/` only wires (settings, urls, asgi), so nothing imports it. `infra/` is shared
infrastructure and knows no app. `memories/` is the domain: it knows no transport (mcp_gateway),
no account pages or OAuth (accounts) and no wiring. `accounts/` knows the domain but not the MCP
endpoint. Every `import` and `from … import` counts, at module level or inside a function.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN: dict[str, frozenset[str]] = {
    "infra": frozenset({"threengram", "memories", "accounts", "mcp_gateway"}),
    "memories": frozenset({"threengram", "accounts", "mcp_gateway"}),
    "accounts": frozenset({"threengram", "mcp_gateway"}),
    "mcp_gateway": frozenset({"threengram"}),
}


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    imported: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} imports {self.imported}"


def _module_name(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute dotted name) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path, root)
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return sorted(found)


def violations(root: Path, package: str, forbidden: frozenset[str]) -> list[Violation]:
    """Imports of a forbidden top-level package anywhere under `root/package`."""
    result = []
    for path in sorted((root / package).rglob("*.py")):
        for line, name in imported_modules(path, root):
            if name.split(".")[0] in forbidden:
                result.append(Violation(str(path.relative_to(root)), line, name))
    return result


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_its_room_allows(package):
    found = violations(ROOT, package, FORBIDDEN[package])
    assert not found, "\n".join(map(str, found))


def test_the_rule_catches_forbidden_imports_of_every_form(tmp_path):
    (tmp_path / "memories" / "sub").mkdir(parents=True)
    (tmp_path / "memories" / "__init__.py").write_text("")
    (tmp_path / "memories" / "ok.py").write_text(
        "from memories import models\nimport infra.asyncdb\n"
    )
    (tmp_path / "memories" / "sub" / "bad.py").write_text(
        "from mcp_gateway.tools import call_tool\n"
        "def later():\n"
        "    import threengram.settings\n"
        "import json, accounts.models as account_models\n"
        "from . import ok\n"
    )
    found = violations(tmp_path, "memories", FORBIDDEN["memories"])
    assert [(v.path, v.line, v.imported) for v in found] == [
        ("memories/sub/bad.py", 1, "mcp_gateway.tools"),
        ("memories/sub/bad.py", 3, "threengram.settings"),
        ("memories/sub/bad.py", 4, "accounts.models"),
    ]


def test_infra_may_not_import_any_app(tmp_path):
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "logs.py").write_text("from memories.tenancy import current_tenant\n")
    assert [v.imported for v in violations(tmp_path, "infra", FORBIDDEN["infra"])] == [
        "memories.tenancy"
    ]


def test_the_tenant_setting_is_named_in_one_module():
    """Row-level security's setting name is written once (infra/asyncdb.py); every statement
    builds on that constant. Migrations keep the SQL they ran with."""
    quoted = ('"threengram.tenant_id"', "'threengram.tenant_id'")
    holders = sorted(
        str(path.relative_to(ROOT))
        for package in (*FORBIDDEN, "threengram")
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and any(q in path.read_text() for q in quoted)
    )
    assert holders == ["infra/asyncdb.py"]


def test_the_domain_names_no_table_of_another_app():
    """memories/ reaches the user table through the user model, never by a hard-coded name."""
    named = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "memories").rglob("*.py")
        if "migrations" not in path.parts and "accounts_" in path.read_text()
    ]
    assert named == []
