"""Fault-injection suite: link cuts, console kills, server crashes, unreachable hosts, full disks, bad nvidia-smi."""
