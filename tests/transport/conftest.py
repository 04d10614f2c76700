"""Transport tests run against real sshd test hosts."""

pytest_plugins = ["tests.fixtures.sshhosts"]
