"""The CLI's one grammar: every argument explained, TUI options only where a TUI opens, verbs as help names them."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from console.cli import build_parser


def _parsers(p: argparse.ArgumentParser, path: str = "dflash-console") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_argument_of_every_subcommand_has_a_help_text():
    empty = []
    for path, p in _parsers(build_parser()):
        for a in p._actions:
            if isinstance(a, argparse._HelpAction | argparse._VersionAction):
                continue
            if isinstance(a, argparse._SubParsersAction):
                empty += [f"{path} {c.dest}" for c in a._choices_actions if not (c.help or "").strip()]
                continue
            if not (a.help or "").strip() or a.help == argparse.SUPPRESS:
                empty.append(f"{path} {'/'.join(a.option_strings) or a.dest}")
    assert not empty, "arguments without a help text: " + ", ".join(empty)


def test_only_the_ui_commands_take_theme():
    with_theme = sorted(
        path for path, p in _parsers(build_parser()) if any("--theme" in a.option_strings for a in p._actions)
    )
    assert with_theme == ["dflash-console", "dflash-console serve"], with_theme


def test_router_help_names_its_verbs_and_the_old_words_still_work(tmp_path: Path, capsys):
    from console.cli import main
    from console.commands.router import ALIASES, VERBS

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    said = next(c.help for c in sub._choices_actions if c.dest == "router") or ""
    assert all(v in said for v in VERBS), said
    hosts = tmp_path / "hosts.toml"
    hosts.write_text('[hosts.box]\ntransport = "local"\n')
    assert set(ALIASES) == {"start", "stop", "show"}
    assert main(["--hosts", str(hosts), "router", "show"]) == 0
    assert capsys.readouterr().out.strip() == "no [routers.NAME] in hosts.toml"
    assert main(["--hosts", str(hosts), "router", "stop", "gen"]) == 2
    assert "error: unknown router 'gen' (known: none)" in capsys.readouterr().err


def test_gpu_names_are_cut_at_a_word():
    from console.commands.status import cut_at_word

    assert cut_at_word("RTX PRO 6000 Blackwell SE", 32) == "RTX PRO 6000 Blackwell SE"
    assert cut_at_word("NVIDIA RTX PRO 6000 Blackwell Server Edition", 32) == "NVIDIA RTX PRO 6000 Blackwell…"
    assert cut_at_word("H100-SXM5-80GB-HBM3-ENGINEERING-SAMPLE-X", 10) == "H100-SXM5…"


def test_launch_progress_says_the_tuis_phase_words():
    from console.commands.launch import progress_line
    from console.sglang.phase import Phase

    assert (
        progress_line("s@h:gpu2", Phase.LOADING_WEIGHTS, (7, 15), None, 12)
        == "s@h:gpu2  loading weights  7/15 shards  (12 s)"
    )
    assert progress_line("s@h:gpu2", Phase.CUDA_GRAPH, None, (24, 36), 40) == "s@h:gpu2  CUDA graphs  bs 24/36  (40 s)"
    assert progress_line("s@h:gpu2", Phase.WARMING, None, None, 50) == "s@h:gpu2  warming up  (50 s)"


def test_a_mistyped_command_verb_or_kind_gets_the_one_typo_message(capsys):
    import pytest

    from console.cli import COMMANDS, main
    from console.commands.sim import CRASH_KINDS
    from console.sim.control import CRASH_KINDS as SIM_KINDS

    assert CRASH_KINDS == SIM_KINDS
    cases = {
        ("stauts",): f"error: unknown command 'stauts'; did you mean 'status'? (known: {', '.join(COMMANDS)})",
        ("router", "upp", "gen"): "error: argument VERB: unknown verb 'upp'; did you mean 'up'? (known: up, down,",
        ("sim", "crash", "--dir", "d", "--host", "h", "--port", "1", "--kind", "segv"): (
            "error: argument --kind: unknown kind 'segv' (known: cuda-assert, nccl, oom, sigkill, rank-sigkill)"
        ),
        ("bench", "x", "--engine", "sglng"): "unknown engine 'sglng'; did you mean 'sglang'? (known: console, sglang)",
    }
    for argv, said in cases.items():
        with pytest.raises(SystemExit) as e:
            main(list(argv))
        assert e.value.code == 2, argv
        err = capsys.readouterr().err
        assert said in err, (argv, err)


def test_launch_check_stop_and_trust_typos_read_alike(tmp_path: Path, capsys):
    """launch listed `(known: …)`, stop said `did you mean`, check `unknown preset(s): x`: now one message."""
    from console.cli import main

    hosts = tmp_path / "hosts.toml"
    hosts.write_text(
        '[hosts.box]\ntransport = "local"\n'
        '[presets.qwen-gen]\nhost = "box"\ngpus = [0]\nmodel = "/m"\nport = 31999\n'
        '[presets.small]\nhost = "box"\ngpus = [1]\nmodel = "/m"\nport = 31998\n'
    )
    for argv, said in (
        (["launch", "qwen-gn"], "error: unknown preset 'qwen-gn'; did you mean 'qwen-gen'? (known: qwen-gen, small)"),
        (["check", "qwen-gn"], "error: unknown preset 'qwen-gn'; did you mean 'qwen-gen'? (known: qwen-gen, small)"),
        (["stop", "qwen-gn"], "error: unknown server or preset 'qwen-gn'; did you mean 'qwen-gen'? (known: qwen-gen, "),
        (["trust", "bx"], "error: unknown host 'bx'; did you mean 'box'? (known: box)"),
    ):
        assert main(["--hosts", str(hosts), *argv]) == 2, argv
        err = capsys.readouterr().err
        assert said in err, (argv, err)
