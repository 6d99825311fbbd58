"""The documentation site (mkdocs.yml) builds in strict mode and covers the public API.

A broken link or anchor, a page left out of the navigation, and a public name without a docstring or
without its place in the API reference each fail here. The real site is built once, in a subprocess
(about 7 s of CPU, most of it mkdocstrings rendering the reference; 20 s and more of wall time on a
loaded machine); the strict-mode failures are shown on a two-page site built in process (a fraction of
a second each), and the docstrings are read from the source with Griffe, as mkdocstrings reads them,
without importing the package.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import griffe
import pytest
import yaml
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort
from mkdocs.utils import yaml_load

from conveyor.errors import UnknownOptionError
from conveyor.request import ENQUEUE_OPTIONS, JobRequest

ROOT = Path(__file__).resolve().parent.parent
#: The public modules whose every public name the API reference documents (docs/reference/).
PUBLIC_MODULES = [
    "conveyor",
    "conveyor.testing",
    "conveyor.testing.plugin",
    "conveyor.web",
    "conveyor.web.starlette",
    "conveyor.web.dashboard",
    *sorted(
        f"conveyor.contrib.{path.stem}"
        for path in (ROOT / "src/conveyor/contrib").iterdir()
        if not path.name.startswith("_") and (path.suffix == ".py" or (path / "__init__.py").exists())
    ),
]


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = mkdocs_build(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr[-6000:]}"
    return out


@pytest.fixture(scope="module")
def package() -> griffe.Module:
    """The package as mkdocstrings reads it: from the source, with the site's Griffe extensions."""
    extensions = griffe.load_extensions("griffe_sphinx", str(ROOT / "scripts/griffe_blocking_twins.py"))
    loader = griffe.GriffeLoader(
        search_paths=[str(ROOT / "src")], extensions=extensions, allow_inspection=False
    )
    loaded = loader.load("conveyor")
    loader.resolve_aliases(implicit=True, external=False)
    assert isinstance(loaded, griffe.Module)
    return loaded


def public_names(package: griffe.Module, module_path: str) -> list[str]:
    """``__all__``, or in a module without one the names it defines without a leading underscore."""
    module = package if module_path == "conveyor" else package[module_path.removeprefix("conveyor.")]
    if module.exports is not None:
        return sorted(str(name) for name in module.exports)
    return sorted(n for n, m in module.members.items() if not n.startswith("_") and not m.is_alias)


def resolved(obj: griffe.Object | griffe.Alias) -> griffe.Object:
    target = obj.final_target if isinstance(obj, griffe.Alias) else obj
    assert isinstance(target, griffe.Object)
    return target


def test_public_modules_are_found() -> None:
    assert {
        "conveyor.contrib.prometheus",
        "conveyor.contrib.opentelemetry",
        "conveyor.contrib.django",
    } <= set(PUBLIC_MODULES)


def test_every_public_name_and_method_has_a_docstring(package: griffe.Module) -> None:
    """Public names, and the methods and properties of public classes (inherited ones too:
    ``Conveyor``'s come from private mixins). Fields are described by their class's docstring."""
    missing = []
    for module_path in PUBLIC_MODULES:
        module = package if module_path == "conveyor" else package[module_path.removeprefix("conveyor.")]
        for name in public_names(package, module_path):
            target = resolved(module[name])
            if not target.docstring or not target.docstring.value.strip():
                missing.append(f"{module_path}.{name}")
            if not isinstance(target, griffe.Class):
                continue
            for member_name, member in target.all_members.items():
                if member_name.startswith("_"):
                    continue
                member_target = resolved(member)
                method = isinstance(member_target, griffe.Function) or "property" in member_target.labels
                if method and not member_target.docstring:
                    missing.append(f"{module_path}.{name}.{member_name}")
    assert not missing, "public names without a docstring:\n" + "\n".join(missing)


@pytest.mark.slow  # the one real build: about 7 s of CPU, for the whole module
def test_the_site_builds_strict_and_has_a_section_for_every_public_name(
    site: Path, package: griffe.Module
) -> None:
    anchors: set[str] = set()
    for page in (site / "reference").rglob("*.html"):
        anchors |= set(re.findall(r'id="(conveyor[\w.]*)"', page.read_text(encoding="utf-8")))
    absent = [
        f"{module}.{name}"
        for module in PUBLIC_MODULES
        for name in public_names(package, module)
        if f"{module}.{name}" not in anchors
    ]
    assert not absent, "public names missing from docs/reference/ (add a ::: line):\n" + "\n".join(absent)
    # The guides, the architecture page and the decision records are all pages of the site (strict
    # mode already refuses a page left out of the navigation; this says which ones are expected).
    for source in [*(ROOT / "docs").rglob("*.md")]:
        relative = source.relative_to(ROOT / "docs").with_suffix("")
        page = relative.parent if relative.name in ("README", "index") else relative
        assert (site / page / "index.html").exists(), f"{source} is not a page of the site"
    assert (site / "index.html").exists() and (site / "search" / "search_index.json").exists()


@pytest.fixture
def tiny_site(tmp_path: Path) -> Path:
    """A site of two pages with mkdocs.yml's own strict and validation settings (and the plain theme,
    to stay fast): what they refuse there, they refuse in the real site."""
    settings = yaml_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the guide](guide.md#usage).\n")
    (docs / "guide.md").write_text("# Guide\n\n## Usage\n\nUse it.\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"site_name: tiny\ndocs_dir: {docs}\nsite_dir: {tmp_path / 'out'}\ntheme: mkdocs\n"
        "nav:\n  - index.md\n  - guide.md\n"
    )
    with config.open("a") as file:  # the real site's settings, as they are
        yaml.safe_dump({"strict": settings["strict"], "validation": settings["validation"]}, file)
    return config


def build_in_process(config: Path) -> None:
    """Build the tiny site in this process (a fraction of a second; raises ``Abort`` in strict mode)."""
    build(load_config(str(config)))


def test_the_tiny_site_builds(tiny_site: Path) -> None:
    build_in_process(tiny_site)
    assert (tiny_site.parent / "out" / "guide" / "index.html").exists()


@pytest.mark.parametrize(
    ("page", "text", "complaint"),
    [
        ("index.md", "# Home\n\nSee [the guide](gone.md).\n", "gone.md"),
        ("index.md", "# Home\n\nSee [the guide](guide.md#no-such-part).\n", "no-such-part"),
        ("orphan.md", "# Not in the navigation\n", "orphan.md"),
    ],
    ids=["broken-link", "broken-anchor", "page-not-in-nav"],
)
def test_strict_mode_fails_the_build(
    tiny_site: Path, page: str, text: str, complaint: str, caplog: pytest.LogCaptureFixture
) -> None:
    (tiny_site.parent / "docs" / page).write_text(text)
    with caplog.at_level(logging.WARNING, logger="mkdocs"), pytest.raises(Abort, match="strict mode"):
        build_in_process(tiny_site)
    assert complaint in caplog.text


def test_the_enqueueing_guide_lists_every_option_with_options_accepts() -> None:
    guide = (ROOT / "docs/guides/enqueueing.md").read_text(encoding="utf-8")
    section = guide.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(ENQUEUE_OPTIONS)
    request = JobRequest("tests.w.Job")
    for name in ENQUEUE_OPTIONS:  # each one is really accepted
        request.with_options(**{name: getattr(request, name)})
    with pytest.raises(UnknownOptionError):
        request.with_options(shedule_in=5)


def test_the_dashboard_guide_lists_every_page_url() -> None:
    pytest.importorskip("starlette")
    from starlette.routing import Mount, Route

    from conveyor import Conveyor
    from conveyor.web.dashboard import dashboard_app

    app = dashboard_app(Conveyor("sqlite:///:memory:"))
    paths = {route.path for route in app.routes if isinstance(route, Route | Mount)}
    guide = (ROOT / "docs/guides/dashboard.md").read_text(encoding="utf-8")
    section = guide.split("\n### Page URLs\n", 1)[1].split("\n## ", 1)[0]
    listed = {path.removesuffix("/...") for path in re.findall(r"^\| `(/[^`]*)` \|", section, re.MULTILINE)}
    assert listed == paths


def test_links_out_of_docs_point_at_the_sites_pages() -> None:
    """The hook's rewriting (scripts/mkdocs_hooks.py): the README, the examples and the benchmarks are
    pages; another repository file becomes its path as text; a link to nothing is left for strict mode
    to report."""
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts/mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    rewrite = hooks._rewrite

    def guide(text: str) -> str:
        return str(rewrite(text, "docs/guides/testing.md", "guides/testing.md"))

    assert guide("[run](../../examples/outcomes.py)") == "[run](../examples/outcomes.md)"
    assert guide("[the README](../../README.md#benchmarks)") == "[the README](../index.md#benchmarks)"
    assert guide("[numbers](../../benchmarks/README.md)") == "[numbers](../benchmarks.md)"
    assert guide("[its tests](../../tests/test_docs_site.py)") == (
        "its tests (`tests/test_docs_site.py` in the repository)"
    )
    assert guide("[gone](../../examples/gone.py)") == "[gone](../../examples/gone.py)"
    assert guide("[`outcomes.py`](../../examples/outcomes.py)") == "[`outcomes.py`](../examples/outcomes.md)"
    code = "[same](delivery.md#measured) and `[code](../../examples/outcomes.py)`"
    assert guide(code) == code
    assert (
        guide("```\n[in code](../../examples/outcomes.py)\n```\n")
        == "```\n[in code](../../examples/outcomes.py)\n```\n"
    )
    readme = rewrite(
        "[Defining jobs](docs/guides/defining-jobs.md), [examples](examples/)", "README.md", "index.md"
    )
    assert readme == "[Defining jobs](guides/defining-jobs.md), [examples](examples/index.md)"
