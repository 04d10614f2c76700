"""TomlLocator finds keys and array elements in tables, inline tables, quoted keys and multiline arrays."""

from console.tomlpos import TomlLocator

TEXT = """# comment
[hosts."ct-129"]
address = "10.0.0.1"   # trailing
env = { LD_LIBRARY_PATH = "/x", B = 'y' }

[presets.gen]
args = [
  "--a", # first
  "--b",
]
"""


def test_positions() -> None:
    loc = TomlLocator(TEXT)
    assert loc.find(("hosts", "ct-129")) == (2, 1)
    assert loc.find(("hosts", "ct-129", "address")) == (3, 1)
    assert loc.find(("hosts", "ct-129", "env", "B")) == (4, 33)
    assert loc.find(("presets", "gen", "args", 1)) == (9, 3)
    assert loc.find(("presets", "gen", "args", 0), value=True) == (8, 3)


def test_unknown_path_falls_back_to_parent() -> None:
    loc = TomlLocator(TEXT)
    assert loc.find(("presets", "gen", "nope")) == (6, 1)
    assert loc.find(("zzz",)) == (1, 1)
