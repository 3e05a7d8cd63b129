"""The README and the manual in docs/ stay navigable: every relative link and image resolves
(anchors included), and the README keeps the commands CI and newcomers rely on."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", re.S)


def markdown_files() -> list[Path]:
    """The README, ARCHITECTURE.md and every page of docs/."""
    return [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").rglob("*.md"))]


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {anchor(m.group(1)) for m in re.finditer(r"^#+ (.*)$", text, re.M)}


def broken_links(path: Path) -> list[str]:
    """Relative links of ``path`` whose file (or heading) does not exist."""
    broken = []
    for target in LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        destination = (path.parent / file).resolve() if file else path
        names_heading = bool(fragment) and destination.suffix == ".md"
        if not destination.exists() or (names_heading and fragment not in anchors(destination)):
            broken.append(target)
    return broken


def test_anchor_follows_github() -> None:
    assert anchor("Workflows and `tether run`") == "workflows-and-tether-run"
    assert anchor("Both backends") == "both-backends"


def test_every_relative_link_resolves(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Here\n[a](page.md#here) [b](gone.md) [c](page.md#nowhere)\n")
    assert broken_links(page) == ["gone.md", "page.md#nowhere"]
    assert {str(p.relative_to(ROOT)): broken_links(p) for p in markdown_files()} == {
        str(p.relative_to(ROOT)): [] for p in markdown_files()
    }


def test_readme_keeps_the_setup_and_test_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    assert first_block == (
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/tether demo\n"
        "python3 -m venv .venv && .venv/bin/pip install '.[test]' && .venv/bin/python -m pytest"
        " -n 2\n"
    )
    # CI runs the README's test command, workers included.
    assert "python -m pytest -n 2 " in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'eval "$(.ci/postgres-up)" && python -m pytest --postgresql' in readme
    assert "python -m pytest --run-slow -m slow" in readme


def test_every_install_hint_works_from_a_checkout() -> None:
    """`tether` is not on PyPI: `pip install 'tether[x]'` fails ("No matching distribution
    found for tether"). Hints name `.[x]` (from a checkout) or the real package names."""
    wrong = re.compile(r"pip install [\"']?tether\[")
    offenders = []
    for folder in ("store", "engine", "tui", "tools", "docs", "bench", "tests"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md") and path.is_file() and path != Path(__file__):
                for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if wrong.search(line):
                        offenders.append(f"{path.relative_to(ROOT)}:{number}")
    for name in ("README.md", "pyproject.toml", "ARCHITECTURE.md"):
        if wrong.search((ROOT / name).read_text()):
            offenders.append(name)
    assert offenders == []
