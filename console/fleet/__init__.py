"""Fleet control: pure state (events + reducer), host links, monitors and lifecycle actions."""
