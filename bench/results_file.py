"""bench/RESULTS.md: each benchmark owns one marked section and rewrites only that."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(section: str, markdown: str, path: Path = RESULTS) -> None:
    """Replace the text between `<!-- section: start -->` and `<!-- section: end -->` (append if new)."""
    start, end = f"<!-- {section}: start -->", f"<!-- {section}: end -->"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    block = f"{start}\n{markdown.rstrip()}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def publish(section: str, lines: list[str], write: bool = True) -> int:
    """Print a benchmark's section and (unless `write` is off) put it in RESULTS.md; 0 for main()."""
    markdown = "\n".join(lines)
    print(markdown)
    if write:
        write_section(section, markdown)
    return 0
