"""GPU telemetry: nvidia-smi query building and parsing."""
