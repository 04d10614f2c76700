"""The README's recipe, end to end: `serve` on a host (as root: inside a test host's own network namespace,
so its 127.0.0.1 is reachable only through SSH), `ssh -N -L LOCAL:127.0.0.1:PORT host` through that host's
real sshd, and Chromium on this side opening http://127.0.0.1:LOCAL/?token=… (another port than serve's)."""

from __future__ import annotations

import socket
import subprocess
import time

from tests.browser.test_browser_serve import FLEET, open_page
from tests.fixtures.testnet import free_port
from tests.patience import patient
from tests.serve.served import serve


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + patient(timeout)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ssh -L exited {proc.returncode}: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"ssh -L never listened on {port}")


def test_the_console_through_an_ssh_tunnel(browser, ssh_host) -> None:
    inside = ("ip", "netns", "exec", ssh_host.ns) if ssh_host.netns else ()
    with serve("--demo", prefix=inside) as s:
        port = int(s.base.rsplit(":", 1)[1])
        local = free_port("127.0.0.1")
        assert local != port
        ssh = subprocess.Popen(
            [
                "ssh",
                "-N",
                "-o",
                "BatchMode=yes",
                "-o",
                "ExitOnForwardFailure=yes",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                f"UserKnownHostsFile={ssh_host.known_hosts}",
                "-o",
                "StrictHostKeyChecking=yes",
                "-i",
                str(ssh_host.client_key),
                "-p",
                str(ssh_host.port),
                "-L",
                f"127.0.0.1:{local}:127.0.0.1:{port}",
                f"{ssh_host.user}@{ssh_host.address}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            wait_port(local, ssh, 10)
            url = s.url.replace(f"127.0.0.1:{port}/", f"127.0.0.1:{local}/")
            if ssh_host.netns:  # serve's 127.0.0.1 is the host's own: only the tunnel reaches it from here
                with socket.socket() as direct:
                    assert direct.connect_ex(("127.0.0.1", port)) != 0
            ctx, page, mirror, elsewhere = open_page(browser, f"http://127.0.0.1:{local}")
            try:
                resp = page.goto(url)
                assert resp is not None and resp.ok and page.url == f"http://127.0.0.1:{local}/"
                mirror.wait_for(*FLEET, timeout=20)
                assert mirror.sockets[0].url.startswith(f"ws://127.0.0.1:{local}/ws")
                assert elsewhere == []  # every request went through the tunnel's port
            finally:
                ctx.close()
        finally:
            ssh.terminate()
            ssh.wait(patient(5))
