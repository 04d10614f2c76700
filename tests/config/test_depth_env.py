"""Deeply nested values and bad env names: located errors (file:line:col: field), never a traceback."""

from __future__ import annotations

import pytest

from console.config import MAX_DEPTH, ConfigError, Preset, parse_fleet
from console.tomlpos import too_deep

HEAD = '[hosts.h]\ntransport = "local"\n\n[presets.p]\nhost = "h"\ngpus = [0]\nmodel = "/m"\n'


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("[" * 5000 + "]" * 5000, 8),  # arrays (tomllib: RecursionError)
        ("{ a = " * 600 + "1" + " }" * 600, 8),  # inline tables
        ("[" + "{ a = [" * 400 + "1" + "] }" * 400 + "]", 8),  # both, interleaved
        ("[\n" * 2000 + "]\n" * 2000, 8 + MAX_DEPTH),  # multi-line array: the first bracket too deep
    ],
    ids=["arrays", "inline-tables", "interleaved", "multi-line"],
)
def test_deep_value_is_a_located_error(value: str, line: int) -> None:
    """Regression: these raised RecursionError out of tomllib (a traceback at the user)."""
    text = HEAD + "args = " + value + "\n"
    with pytest.raises(ConfigError) as ei:
        parse_fleet(text, "f.toml")
    (issue,) = ei.value.issues
    assert (issue.file, issue.line) == ("f.toml", line)
    assert f"nested more than {MAX_DEPTH} deep" in issue.message
    assert str(issue).startswith(f"f.toml:{line}:")


def test_depth_at_the_limit_is_not_a_depth_error() -> None:
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert too_deep(f"x = {ok}\n", MAX_DEPTH) is None
    assert too_deep(f"x = [{ok}]\n", MAX_DEPTH) == (1, 5 + MAX_DEPTH)


@pytest.mark.parametrize(
    "text",
    ids=["basic", "literal", "multi-basic", "multi-literal", "comment", "key", "headers"],
    argvalues=[
        'x = "' + "[" * 100 + '"\n',
        "x = '" + "{" * 100 + "'\n",
        'x = """\n' + "[" * 100 + '\n"""\n',
        "x = '''" + "[" * 100 + "'''\n",
        "# " + "[" * 100 + "\n",
        '"k[[[[[[[[[[[[[[[[[[[[[[[[" = 1\n',
        "[a]\n[[b]]\n[[b]]\n" * 30,
    ],
)
def test_brackets_in_strings_comments_and_headers_do_not_count(text: str) -> None:
    assert too_deep(text, MAX_DEPTH) is None


def test_a_real_file_is_not_too_deep() -> None:
    fleet = parse_fleet(HEAD + 'port = [30000]\nenv = { A = "1" }\nargs = ["--x", "[[[["]\n')
    assert fleet.presets["p"].args == ["--x", "[[[["]


@pytest.mark.parametrize("key", ['"X=Y"', '"1A"', '"A-B"', '"A B"', '""', '"A\\u001b[31m"', '"Ä"'])
def test_bad_env_name_is_located(key: str) -> None:
    """Regression: `"X=Y" = "v"` was accepted, and `env X=Y=v` set X to `Y=v` on the host."""
    text = HEAD + f'\n[presets.p.env]\nGOOD = "1"\n{key} = "v"\n'
    with pytest.raises(ConfigError) as ei:
        parse_fleet(text, "f.toml")
    (issue,) = ei.value.issues
    assert (issue.file, issue.line, issue.column) == ("f.toml", 11, 1)
    assert issue.field.startswith("presets.p.env.")
    assert "invalid environment variable name" in issue.message
    assert "\x1b" not in str(issue)


def test_bad_host_env_names_all_reported_inline() -> None:
    text = '[hosts.h]\ntransport = "local"\nenv = { OK_1 = "a", "X=Y" = "b", "9" = "c" }\n'
    with pytest.raises(ConfigError) as ei:
        parse_fleet(text, "f.toml")
    assert [(i.field, i.line) for i in ei.value.issues] == [('hosts.h.env."X=Y"', 3), ("hosts.h.env.9", 3)]
    assert ei.value.issues[0].column < ei.value.issues[1].column


def test_good_env_names_pass_and_models_refuse_bad_ones() -> None:
    fleet = parse_fleet(HEAD + 'env = { HF_TOKEN = "t", _x9 = "y", LD_LIBRARY_PATH = "/l" }\n')
    assert set(fleet.presets["p"].env) == {"HF_TOKEN", "_x9", "LD_LIBRARY_PATH"}
    with pytest.raises(ValueError, match="invalid environment variable name"):
        Preset(host="h", gpus=[0], model="/m", env={"X=Y": "v"})


def test_check_of_a_local_model_whose_config_json_is_too_deep(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Regression: `check` read a local host's config.json with json.loads, so one nested 100,000 deep was a
    RecursionError traceback; now the lint rules that need it are skipped with a warning naming the file."""
    import subprocess
    import sys
    from pathlib import Path

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[hosts.h]\ntransport = "local"\n\n[presets.p]\nhost = "h"\ngpus = [0]\nmodel = "{model}"\n')
    r = subprocess.run(
        [sys.executable, "-m", "console", "check", "--hosts", str(hosts)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr + r.stdout, r.stderr[-500:]
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{model}/config.json" in r.stdout and "nested deeper than" in r.stdout, r.stdout
