"""The simulated GPU fleet: nvidia-smi and SGLang stand-ins the console cannot tell from real hosts.

Entry points: `console.sim.fleet` (sim_up / sim_down / build_host), `console.sim.spec` (host specs),
`console.sim.control` (crash / slow down a running sim server). The SGLang texts it reproduces: docs/sglang.md.
"""
