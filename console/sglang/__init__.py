"""SGLang knowledge: log parsing, crash diagnosis, command building, lint, HTTP client (no IO here but the client)."""
