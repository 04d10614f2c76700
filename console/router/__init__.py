"""Replica groups behind SGLang's own router (`sglang_router.launch_router`): config, command, API, lifecycle."""
