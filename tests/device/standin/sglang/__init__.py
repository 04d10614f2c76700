"""The stand-in `sglang` package: only `sglang.launch_server` (see its docstring)."""
