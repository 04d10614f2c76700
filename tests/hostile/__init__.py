"""Hostile-input suite: malformed config, escape-laden text, shell metacharacters, unknown host keys, secrets."""
