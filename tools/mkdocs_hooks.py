"""MkDocs hooks of pykured's documentation site (``mkdocs.yml``: ``hooks``).

The pages in ``docs/`` are written to read the same on GitHub and on the site, so they link to the
repository's other files by relative paths (``../COMPATIBILITY.md#…``, ``../charts/pykured/values.yaml``).
MkDocs knows only ``docs/``; these hooks make those links work on the site and keep them checked:

* ``COMPATIBILITY.md`` (at the top of the repository, where operators look for it) becomes the site's page
  ``compatibility.md``, generated from the file, so links into it and their anchors are validated like any
  page's; its own links (``docs/x.md``, relative to the top) are made relative to the site.
* every other relative link that leaves ``docs/`` for a file of the repository becomes a link to that file
  under ``repo_url`` (``blob/main/…``, ``tree/main/…`` for a directory); a link to a file that does not exist,
  or one that leaves the repository, is a warning, which ``strict: true`` turns into a failed build.

MkDocs' hook events: https://www.mkdocs.org/dev-guide/plugins/#events
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.pykured")

# The file at the top of the repository that the site includes as a page, and that page's name.
INCLUDED = {"COMPATIBILITY.md": "compatibility.md"}

# An inline link or image: ](target) or ](target "title"); the target has no spaces (none of ours has).
LINK = re.compile(r"\]\((?P<target>[^)\s]+)(?P<title>\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _root(config: Any) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def _docs_prefix(config: Any) -> str:
    """docs_dir as a path relative to the repository's top, with a trailing slash (``docs/``)."""
    return Path(config["docs_dir"]).resolve().relative_to(_root(config)).as_posix() + "/"


def on_files(files: Files, *, config: Any) -> Files:
    """Adds each included file of the repository's top as a generated page."""
    root = _root(config)
    for source, page in INCLUDED.items():
        files.append(File.generated(config, page, content=(root / source).read_text(encoding="utf-8")))
    return files


def on_serve(server: Any, *, config: Any, builder: Any) -> Any:
    """``mkdocs serve`` rebuilds when an included file changes too."""
    for source in INCLUDED:
        server.watch(str(_root(config) / source))
    return server


def rewrite(
    markdown: str, *, page_uri: str, source: str, docs_prefix: str, root: Path, repo_url: str
) -> tuple[str, list[str]]:
    """The page's Markdown with its links leaving ``docs/`` made site links or repository URLs.

    ``page_uri`` is the page in the site (``install.md``), ``source`` the file it was made from, relative to
    the repository's top (``docs/install.md``, ``COMPATIBILITY.md``). Returns the text and one message per
    link that names no file of the repository. Links inside fenced code blocks are left alone.
    """
    problems: list[str] = []
    page_dir = posixpath.dirname(page_uri)
    source_dir = posixpath.dirname(source)

    def fix(match: re.Match[str]) -> str:
        target = match["target"]
        if target.startswith(("#", "/")) or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            return match[0]  # an anchor, an absolute path (MkDocs' validation judges it), a URL
        path, hash_, fragment = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(source_dir, path))
        anchor = hash_ + fragment
        if resolved.startswith(docs_prefix):
            new = posixpath.relpath(resolved.removeprefix(docs_prefix), page_dir or ".")
        elif resolved in INCLUDED:
            new = posixpath.relpath(INCLUDED[resolved], page_dir or ".")
        elif resolved == ".." or resolved.startswith("../") or not (root / resolved).exists():
            problems.append(f"{source}: the link '{target}' names no file of the repository")
            return match[0]
        else:
            kind = "tree" if (root / resolved).is_dir() else "blob"
            new = f"{repo_url.rstrip('/')}/{kind}/main/{resolved}"
        return f"]({new}{anchor}{match['title'] or ''})"

    out: list[str] = []
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            fenced = not fenced
        out.append(line if fenced else LINK.sub(fix, line))
    return "".join(out), problems


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Files) -> str:
    """Rewrites the page's links that leave ``docs/`` (see the module's docstring)."""
    uri = page.file.src_uri
    generated = {page_: src for src, page_ in INCLUDED.items()}
    prefix = _docs_prefix(config)
    source = generated[uri] if page.file.generated_by and uri in generated else prefix + uri
    text, problems = rewrite(
        markdown,
        page_uri=uri,
        source=source,
        docs_prefix=prefix,
        root=_root(config),
        repo_url=config["repo_url"],
    )
    for problem in problems:
        log.warning(problem)
    return text
