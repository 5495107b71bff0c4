"""``fleet.settings.Settings``: what a process reads from its ``FLEET_*`` variables."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from fleet.backends import DEFAULT_BACKEND_URL
from fleet.settings import Settings


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FLEET_* variable of the test run's own leaks into these tests."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("FLEET_"):
            monkeypatch.delenv(name)


def test_defaults_without_variables() -> None:
    s = Settings()
    assert s.backend_url == DEFAULT_BACKEND_URL
    assert s.read_tokens == [] and s.token_scopes == {} and s.trusted_proxies == []
    assert s.gc_threshold == 10_000 and s.port == 8000 and s.max_connections is None


def test_variables_are_read_in_any_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_BACKEND_URL", "sqlite:///tmp/x.db")
    monkeypatch.setenv("fleet_heartbeat_seconds", "2.5")
    monkeypatch.setenv("Fleet_Metrics_Public", "yes")
    monkeypatch.setenv("FLEET_MAX_CONNECTIONS", "64")
    s = Settings()
    assert s.backend_url == "sqlite:///tmp/x.db"
    assert s.heartbeat_seconds == 2.5
    assert s.metrics_public is True
    assert s.max_connections == 64


def test_lists_are_comma_separated_and_scopes_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_READ_TOKENS", " r1, r2 ,,")
    monkeypatch.setenv("FLEET_TRUSTED_PROXIES", "10.0.0.1")
    monkeypatch.setenv("FLEET_TOKEN_SCOPES", json.dumps({"s": ["scraper", "pinger"]}))
    s = Settings()
    assert s.read_tokens == ["r1", "r2"]
    assert s.trusted_proxies == ["10.0.0.1"]
    assert s.token_scopes == {"s": ["scraper", "pinger"]}
    monkeypatch.setenv("FLEET_TOKEN_SCOPES", "  ")
    assert Settings().token_scopes == {}


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_PORT", "9000")
    monkeypatch.setenv("FLEET_ADMIN_TOKEN", "from-env")
    s = Settings(port=9100, read_tokens=["a"])
    assert s.port == 9100 and s.read_tokens == ["a"]
    assert s.admin_token == "from-env"


def test_other_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_NOT_A_SETTING", "x")
    monkeypatch.setenv("FLEETPORT", "1")  # no underscore: not ours
    monkeypatch.setenv("PORT", "1")
    assert Settings().port == 8000


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FLEET_PORT", "eighty"),
        ("FLEET_PORT", "70000"),
        ("FLEET_GC_THRESHOLD", "-1"),
        ("FLEET_SWEEP_SECONDS", "0"),
        ("FLEET_TOKEN_SCOPES", "{not json"),
        ("FLEET_TOKEN_SCOPES", '{"t": "not a list"}'),
        ("FLEET_MAX_CONNECTIONS", ""),
    ],
)
def test_a_bad_value_names_its_field(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as info:
        Settings()
    assert info.value.errors()[0]["loc"][0] == name.removeprefix("FLEET_").lower()


def test_reading_settings_imports_no_settings_library() -> None:
    """The worker's start pays for neither pydantic-settings nor python-dotenv."""
    code = (
        "import sys; from fleet.settings import Settings; Settings(); "
        "print(sorted(m for m in ('pydantic_settings', 'dotenv') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
