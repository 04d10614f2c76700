"""Top-level pytest setup: plugins must be registered here (pytest refuses them in nested conftests)."""

pytest_plugins = ["tests.fixtures.sshhosts"]
