"""Tests for console.sglang: log parser, diagnosis, lint rules, validation, HTTP client, the diagnose command."""
