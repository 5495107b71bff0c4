"""Config generation decisions and validation, as plain values."""

from __future__ import annotations

from fleet.core.config import BaseConfig
from fleet.worker.configstate import check_config, config_action, proxy_changed


class Needs(BaseConfig):
    api_key: str
    region: str
    depth: int = 1


def test_first_start_initializes() -> None:
    assert config_action(0, 0) == "initialize"


def test_only_higher_generations_apply() -> None:
    assert config_action(3, 4) == "apply"
    assert config_action(0, 4) == "apply"
    assert config_action(3, 3) == "ignore"


def test_lower_or_missing_stored_generation_is_left_to_the_heal() -> None:
    # The heartbeat compares the worker's own desired config with what it holds.
    assert config_action(5, 2) == "ignore"
    assert config_action(5, 0) == "ignore"


def test_missing_required_fields_are_named() -> None:
    checked = check_config(Needs, {"slots": 2})
    assert not checked.ok
    assert checked.missing == ("api_key", "region")
    assert checked.error == "missing required config field(s): api_key, region"


def test_invalid_value_names_the_field() -> None:
    checked = check_config(Needs, {"api_key": "k", "region": "eu", "depth": "deep"})
    assert not checked.ok and checked.error is not None
    assert "depth" in checked.error


def test_valid_config() -> None:
    checked = check_config(Needs, {"api_key": "k", "region": "eu", "slots": 4})
    assert checked.ok and checked.config is not None
    assert checked.config.slots == 4 and checked.error is None


def test_proxy_changed() -> None:
    a = BaseConfig(proxy_url="http://a:1")
    assert not proxy_changed(None, a)
    assert not proxy_changed(a, BaseConfig(proxy_url="http://a:1", slots=9))
    assert proxy_changed(a, BaseConfig(proxy_url="http://b:1"))
    assert proxy_changed(a, BaseConfig(proxy_url="http://a:1", proxy_provider="template"))
