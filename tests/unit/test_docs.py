"""The documentation stays true to the code and whole: the README opens with the two commands
.ci/run relies on and points into docs/; each docs page names what it must (every directive,
sync event and field, every option and output of `pyrepl metrics` and `pyrepl collect`); every
relative link of the README and the pages resolves; mkdocs.yml's nav lists every page, and the
site builds under --strict."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pyrepl.config import DIRECTIVES, Config
from pyrepl.events import EVENTS, FIELDS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    head = README[:1500]
    assert "make demo" in head and "make test" in head
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci


# ---------------------------------------------------------------------------------------------
# what each page must name
# ---------------------------------------------------------------------------------------------

# A row of the directive tables: | `name` (alias: a, b) | `default` | yes|no | notes |
_DIRECTIVE_ROW = re.compile(r"^\| `([^`]+)`(?: \(alias: ([^)]*)\))? \| `([^`]*)` \| (yes|no) \|",
                            re.M)


def _directive_rows(text: str) -> dict[str, tuple[str, str, bool]]:
    return {m[1]: (m[2] or "", m[3], m[4] == "yes") for m in _DIRECTIVE_ROW.finditer(text)}


def test_every_directive_is_documented() -> None:
    text = page("configuration.md")
    missing = [d.name for d in DIRECTIVES if f"`{d.name}`" not in text]
    assert not missing, missing


def test_directive_tables_match_the_code() -> None:
    """Each directive has one row, in the table of those with an effect or of those accepted
    with none as its ``noop`` says, with its aliases, its default (as CONFIG GET shows it, or as
    written in the code: `dir` is shown `.`) and whether CONFIG SET may change it."""
    effect, _, no_effect = page("configuration.md").partition("\n## Accepted, no effect\n")
    assert no_effect, "configuration.md has no '## Accepted, no effect' table"
    tables = {False: _directive_rows(effect), True: _directive_rows(no_effect)}
    cfg = Config()
    wrong: list[str] = []
    for d in DIRECTIVES:
        row = tables[d.noop].get(d.name)
        if row is None:
            wrong.append(f"{d.name}: not in the table of noop={d.noop}")
            continue
        aliases, default, settable = row
        if aliases != ", ".join(d.aliases):
            wrong.append(f"{d.name}: aliases {aliases!r}, code {d.aliases}")
        if default not in (d.default, d.format(getattr(cfg, d.attr))):
            wrong.append(f"{d.name}: default {default!r}, code {d.default!r}")
        if settable != d.mutable:
            wrong.append(f"{d.name}: CONFIG SET {settable}, code {d.mutable}")
    known = {d.name for d in DIRECTIVES}
    wrong += [f"{n}: no such directive" for t in tables.values() for n in t if n not in known]
    assert not wrong, wrong


def test_every_sync_event_and_field_is_documented() -> None:
    text = page("sync-events.md")
    missing = [e for e in EVENTS if f"| `{e}` |" not in text]
    missing += [f"{f} ({t})" for f, t, _ in FIELDS if f"| `{f}` | {t} |" not in text]
    assert not missing, missing
    rows = re.findall(r"^\| `(\w+)` \| (?:master|replica|node|string|long|double) \|", text, re.M)
    unknown = [r for r in rows if r not in EVENTS and r not in {f for f, _, _ in FIELDS}]
    assert not unknown, unknown


def test_metrics_options_outputs_and_summary_keys_are_documented() -> None:
    from pyrepl.cli.metrics import metrics

    from pyrepl.analytics.report import CHARTS, SUMMARY_KEYS, TABLES

    text = page("analytics.md")
    opts = [o for p in metrics.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    assert opts and "--out" in opts
    missing = [o for o in opts if f"`{o}" not in text]
    missing += [k for k in SUMMARY_KEYS if f"| `{k}` |" not in text]
    missing += [f"{c}.png" for c in CHARTS if f"`{c}.png`" not in text]
    missing += [t for t in TABLES if f"`{t}`" not in text]
    assert not missing, missing
    assert "pyrepl/analytics/submit.py" in text and "spark-submit --master" in text


def test_collect_options_are_documented() -> None:
    from pyrepl.cli.collect import collect

    text = page("analytics.md")
    opts = [o for p in collect.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
    assert opts and "--every" in opts
    missing = [o for o in opts if f"`{o}" not in text]
    assert not missing, missing
    assert "\n## `pyrepl collect`" in text


# ---------------------------------------------------------------------------------------------
# links, nav, the site
# ---------------------------------------------------------------------------------------------

def _html(path: Path) -> str:
    """``path`` rendered as MkDocs renders a page (Python-Markdown with these extensions)."""
    import markdown

    return markdown.markdown(path.read_text("utf-8"), extensions=["tables", "fenced_code", "toc"])


def _anchors(path: Path) -> set[str]:
    return set(re.findall(r'<h[1-6] id="([^"]+)"', _html(path)))


def _broken_links(path: Path) -> list[str]:
    """The relative links of the Markdown file ``path`` that do not resolve: no such file,
    no such heading in the target, or (from docs/) a target outside docs/, which the site
    cannot serve."""
    broken = []
    for target in map(html.unescape, re.findall(r'<a [^>]*href="([^"]*)"', _html(path))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):      # http:, https:, mailto: ...
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path.resolve()
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif DOCS in path.parents and DOCS not in dest.parents:
            broken.append(f"{target}: outside docs/ (write the path as code instead)")
        elif anchor and (dest.suffix != ".md" or anchor not in _anchors(dest)):
            broken.append(f"{target}: no heading #{anchor}")
    return broken


def _doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_doc_pages_exist() -> None:
    assert len(_doc_pages()) >= 10 and (DOCS / "index.md").exists()


@pytest.mark.parametrize("path", [ROOT / "README.md", *_doc_pages()],
                         ids=lambda p: os.path.relpath(p, ROOT))
def test_relative_links_resolve(path: Path) -> None:
    broken = _broken_links(path)
    assert not broken, broken


def test_link_check_can_fail(tmp_path: Path) -> None:
    """The checker above finds each kind of broken link (and passes a good one)."""
    (tmp_path / "b.md").write_text("# B\n\n## Some `code`: part\n")
    bad = tmp_path / "a.md"
    bad.write_text("[x](b.md#some-code-part) [y](c.md) [z](b.md#nope) [w](#nowhere) "
                   "`[not](a link)` [v](https://example.org/x)\n\n# A\n")
    assert _broken_links(bad) == ["c.md: no such file", "b.md#nope: no heading #nope",
                                  "#nowhere: no heading #nowhere"]


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for v in nav.values() for p in _nav_pages(v)]
    return []


def _mkdocs_config() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))


def test_mkdocs_nav_lists_every_page_and_readme_links_them() -> None:
    cfg = _mkdocs_config()
    nav = _nav_pages(cfg["nav"])
    pages = [p.name for p in _doc_pages()]
    assert sorted(nav) == sorted(pages), (nav, pages)
    assert len(set(nav)) == len(nav), nav
    unlinked = [p for p in pages if f"(docs/{p})" not in README and f"(docs/{p}#" not in README]
    assert not unlinked, unlinked


def test_mkdocs_turns_unresolved_links_into_warnings() -> None:
    """--strict fails only on warnings: each kind of bad link must be one."""
    validation = _mkdocs_config()["validation"]
    for key in ("omitted_files", "absolute_links", "unrecognized_links", "anchors"):
        assert validation.get(key) == "warn", key


def test_mkdocs_strict_build(tmp_path: Path) -> None:
    """The site builds with no warning (no -q: it silences the warnings --strict counts)."""
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                          str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert (tmp_path / "site" / "configuration.html").exists()
