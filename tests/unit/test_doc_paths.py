"""Every repository path README.md and docs/*.md name exists.

Docs name files so a reader can open them; a file that moved leaves a path that leads
nowhere, and nothing else notices. Two kinds of mention are checked:

- a word in backticks that looks like a repository path: it has a slash and its first
  segment is a folder at the top of the repository (`engine/src/...`, `hack/ship/rbac.py`,
  `.ci/run`), read from the repository's root. A word inside a longer code span counts too
  (`uv run python bench/api.py`);
- a word in backticks that starts with one of the engine's layer folders (`store/`,
  `runtime/`, `door/`, `rules/`, `shapes/`, `infrastructure/`): docs/engine.md and its
  neighbours name engine modules relative to the engine package, read from there;
- a relative link target (`[x](security.md)`, `(../charts/dirigent/README.md#values)`),
  read from the linking file's folder, as Markdown does.

Ignored: URLs, absolute paths (`/api/v1/...`, `/tmp/...`), globs (`*`), placeholders
(`<name>`, `{name}`, `$VAR`, `...`); a trailing `:line`, `::test` or `#anchor` is dropped.
Every missing path is reported at once, as ``file:line: path``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Fenced blocks are examples (shell sessions, YAML); only prose and inline code are read.
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_PLACEHOLDER = re.compile(r"[<>{}*?\[\]$]|\.\.\.|…")
_SUFFIX = re.compile(r"(::\S*|:\d+(-\d+)?|#.*)$")
_TRIM = "\"'(),.;:!"
ENGINE = Path("engine/src/dirigent/engine")
_LAYERS = ("store", "runtime", "door", "rules", "shapes", "infrastructure")


@dataclass(frozen=True, order=True)
class Mention:
    """A path named at ``doc:line``, and the path it resolves to."""

    doc: str
    line: int
    named: str
    path: Path


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def top_folders(root: Path = ROOT) -> set[str]:
    """The repository's top-level folders (hidden ones are local tool state, except .ci)."""
    return {
        p.name
        for p in root.iterdir()
        if p.is_dir() and (not p.name.startswith(".") or p.name == ".ci")
    }


def mentions(doc: Path, root: Path = ROOT) -> list[Mention]:
    """The repository paths ``doc`` names, with their line numbers."""
    folders = top_folders(root)
    rel = str(doc.relative_to(root))
    found: list[Mention] = []
    fenced = False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for span in _CODE_SPAN.finditer(line):
            for word in span.group(2).split():
                named = _clean(word)
                if not named or "/" not in named:
                    continue
                first = named.split("/", 1)[0]
                if first in folders:
                    found.append(Mention(rel, number, named, root / named))
                elif first in _LAYERS:
                    found.append(Mention(rel, number, named, root / ENGINE / named))
        for link in _LINK.finditer(_CODE_SPAN.sub("", line)):
            named = _clean(link.group(1))
            if named:
                found.append(Mention(rel, number, named, doc.parent / named))
    return found


def _clean(word: str) -> str:
    """``word`` as a path, or "" when it is not one (a URL, absolute, a glob, a placeholder)."""
    word = _SUFFIX.sub("", word.strip(_TRIM)).strip(_TRIM)
    if not word or "://" in word or word.startswith(("/", "~", "mailto:", "-")):
        return ""
    if _PLACEHOLDER.search(word) or "=" in word:
        return ""
    return word


def missing(root: Path = ROOT) -> list[Mention]:
    return sorted(m for doc in documents(root) for m in mentions(doc, root) if not m.path.exists())


def test_every_path_the_docs_name_exists() -> None:
    gone = missing()
    report = "\n".join(f"{m.doc}:{m.line}: {m.named}" for m in gone)
    assert not gone, f"{len(gone)} path(s) named in the docs do not exist:\n{report}"


def test_the_check_finds_what_it_should(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "hack").mkdir()
    (tmp_path / "hack/real.sh").write_text("")
    (tmp_path / "docs/other.md").write_text("")
    (tmp_path / "README.md").write_text(
        "Run `hack/real.sh`, then `bash hack/gone.sh --flag`.\n"
        "```\nhack/in-a-fence.sh\n```\n"
        "Skip `hack/<name>.sh`, `hack/*.sh`, `/hack/abs`, `https://x/hack/y`, `api/v1`.\n"
        "See [other](docs/other.md#top) and [lost](docs/lost.md), not [web](https://x.y/z).\n"
    )
    (tmp_path / "docs/guide.md").write_text(
        "Back to [the readme](../README.md) and [a sibling](missing.md).\n"
        "Line numbers: `hack/real.sh:12`, `hack/gone.sh::test_x`.\n"
    )
    assert [(m.doc, m.line, m.named) for m in missing(tmp_path)] == [
        ("README.md", 1, "hack/gone.sh"),
        ("README.md", 6, "docs/lost.md"),
        ("docs/guide.md", 1, "missing.md"),
        ("docs/guide.md", 2, "hack/gone.sh"),
    ]
