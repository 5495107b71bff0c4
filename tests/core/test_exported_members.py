"""The public surface of ``fleet.core`` is exactly ``__all__``."""

from __future__ import annotations

import pytest

import fleet.core


def test_all_matches_public_names() -> None:
    for name in fleet.core.__all__:  # the names load on first use
        getattr(fleet.core, name)
    public = {
        name
        for name, value in vars(fleet.core).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("fleet.")
    }
    assert public == set(fleet.core.__all__)
    assert set(dir(fleet.core)) >= set(fleet.core.__all__)
    assert set(fleet.core._HOMES) == set(fleet.core.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        fleet.core.Nope  # noqa: B018


def test_all_is_sorted_and_resolvable() -> None:
    assert list(fleet.core.__all__) == sorted(fleet.core.__all__)
    for name in fleet.core.__all__:
        assert getattr(fleet.core, name) is not None


def test_spec_names_are_exported() -> None:
    for name in (
        "BaseConfig",
        "BatchAutomation",
        "ContinuousAutomation",
        "register",
        "Pool",
        "Queue",
        "Stream",
        "Task",
        "Context",
        "FleetError",
    ):
        assert name in fleet.core.__all__


def test_error_tree_is_rooted_at_fleet_error() -> None:
    for name in fleet.core.__all__:
        value = getattr(fleet.core, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, fleet.core.FleetError), name
