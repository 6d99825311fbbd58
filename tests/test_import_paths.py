"""Public import paths that moved keep working."""

from __future__ import annotations

import conveyor.engine.urls as urls


def test_conveyor_engines_still_offers_the_url_helpers() -> None:
    import conveyor.engines as engines

    for name in engines.__all__:
        assert getattr(engines, name) is getattr(urls, name)
    assert engines.default_database_url().endswith("conveyor.db")
