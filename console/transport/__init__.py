"""Transports: run commands and streams on a host over SSH (asyncssh) or locally (asyncio subprocess)."""
