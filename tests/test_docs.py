"""The documentation: README.md stays a front door, and the docs site's strict build catches broken links.

README.md is at most 200 lines and starts with the two commands that work on a fresh machine, the second being
what CI runs. The site (``mkdocs.yml``, built by ``tools/dev test``) fails on a broken link, a broken anchor,
a link to a repository file that does not exist, and a page left out of the nav: each is proven here on a
small copy built in process with the repository's own ``mkdocs.yml`` and hooks (``tools/mkdocs_hooks.py``).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HOOKS = ROOT / "tools" / "mkdocs_hooks.py"


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_the_readme_starts_with_the_demo_and_the_test_command() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# pykured"
    body = [line for line in lines[1:] if line.strip()]
    assert body[0] == "```sh"
    block = body[1 : body.index("```", 1)]
    assert [line.split("#", 1)[0].strip() for line in block] == ["tools/dev demo", "tools/dev test"]


def test_the_readmes_links_name_files_and_headings_that_exist() -> None:
    """README.md is not a page of the site, so its links are checked here: a file, and a heading's anchor
    (made as the site makes them, GitHub's way)."""
    slug = load_config(config_file=str(ROOT / "mkdocs.yml")).mdx_configs["toc"]["slugify"]
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if not re.match(r"^[a-z]+:", link)]
    assert local
    for link in local:
        path, _, anchor = link.partition("#")
        target = (ROOT / path) if path else README
        assert target.exists(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), flags=re.MULTILINE)
            assert anchor in {slug(h, "-") for h in headings}, link


def test_ci_runs_the_readmes_test_command() -> None:
    commands = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert commands[-1] == "tools/dev test"


# -- the strict build, on a small copy --------------------------------------------------------------------

PAGES = {
    "index.md": "# Home\n\n## A section\n\nSee [the other page](other.md#its-section) and [Compatibility]"
    "(../COMPATIBILITY.md#flags-and-variables), [the chart](../charts/values.yaml).\n",
    "other.md": "# Other\n\n## Its section\n\nBack [home](index.md#a-section).\n\n"
    "```text\n[not a link](nowhere.md)\n```\n",
}
NAV = [{"Home": "index.md"}, {"Other": "other.md"}, {"Compatibility": "compatibility.md"}]


def site(tmp: Path, *, pages: dict[str, str] = PAGES, nav: list[dict[str, str]] = NAV) -> Path:
    """A copy of the site's configuration and hooks over small pages; returns where it was built."""
    shutil.copy(ROOT / "mkdocs.yml", tmp / "mkdocs.yml")
    (tmp / "tools").mkdir()
    shutil.copy(HOOKS, tmp / "tools" / HOOKS.name)
    (tmp / "COMPATIBILITY.md").write_text(
        "# Compatibility\n\n## Flags and variables\n\nSee [home](docs/index.md).\n"
    )
    (tmp / "charts").mkdir()
    (tmp / "charts" / "values.yaml").write_text("{}\n")
    (tmp / "docs").mkdir()
    for name, text in pages.items():
        (tmp / "docs" / name).write_text(text)
    config = load_config(config_file=str(tmp / "mkdocs.yml"), site_dir=str(tmp / "site"), nav=nav)
    assert config.strict
    build(config)
    return tmp / "site"


@pytest.fixture(autouse=True)
def _quiet_theme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")  # Material's notice of its end of life, printed per build


def test_the_copy_builds_and_links_leave_docs_correctly(tmp_path: Path) -> None:
    out = site(tmp_path)
    index = (out / "index.html").read_text()
    assert 'href="other/#its-section"' in index
    assert 'href="compatibility/#flags-and-variables"' in index  # COMPATIBILITY.md is a page of the site
    assert 'href="https://github.com/pykured/pykured/blob/main/charts/values.yaml"' in index
    compatibility = (out / "compatibility" / "index.html").read_text()
    assert 'href="../"' in compatibility  # its docs/index.md, made relative to the site


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ("[x](missing.md)", "'missing.md', but the target is not found"),
        ("[x](other.md#no-such-section)", "does not contain an anchor '#no-such-section'"),
        ("[x](#no-such-section)", "'#no-such-section', but there is no such anchor on this page"),
        ("[x](../COMPATIBILITY.md#no-such-row)", "does not contain an anchor '#no-such-row'"),
        ("[x](../charts/missing.yaml)", "names no file of the repository"),
        ("[x](../../outside.md)", "names no file of the repository"),
    ],
)
def test_a_broken_link_fails_the_build(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, broken: str, said: str
) -> None:
    pages = {**PAGES, "index.md": PAGES["index.md"] + f"\n{broken}\n"}
    with caplog.at_level(logging.WARNING, logger="mkdocs"), pytest.raises(Abort):
        site(tmp_path, pages=pages)
    assert any(said in record.getMessage() for record in caplog.records), caplog.text


def test_a_page_missing_from_the_nav_fails_the_build(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mkdocs"), pytest.raises(Abort):
        site(tmp_path, pages={**PAGES, "orphan.md": "# Orphan\n"})
    assert 'not included in the "nav"' in caplog.text
    assert "orphan.md" in caplog.text


def test_every_page_of_the_docs_directory_is_in_the_sites_nav() -> None:
    config = load_config(config_file=str(ROOT / "mkdocs.yml"))

    def pages(nav: Any) -> set[str]:
        if isinstance(nav, str):
            return {nav}
        if isinstance(nav, dict):
            return set().union(*(pages(v) for v in nav.values()))
        return set().union(*(pages(v) for v in nav))

    in_docs = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages(config.nav) == in_docs | {"compatibility.md"}


def test_links_in_code_blocks_are_left_alone() -> None:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", HOOKS)
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    text = "[a](../README.md)\n```md\n[b](../README.md)\n```\n"
    out, problems = hooks.rewrite(
        text, page_uri="x.md", source="docs/x.md", docs_prefix="docs/", root=ROOT, repo_url="https://h/r"
    )
    assert out == "[a](https://h/r/blob/main/README.md)\n```md\n[b](../README.md)\n```\n"
    assert problems == []
