"""The chat client's asyncio byte streams under httpx: installed, and the same behaviour as httpcore's own backend
against real TCP (and TLS) servers: kept connections, a kept connection the server closed, refused, timed out,
cut short."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from console.sglang.aio_streams import AsyncioBackend, use_asyncio_streams
from console.sglang.client import SGLangClient

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[str, list[int]]]:
    """A real TCP server on 127.0.0.1; yields its URL and a list that grows by one per accepted connection."""
    conns: list[int] = []

    async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        conns.append(1)
        try:
            await handler(r, w)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            w.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}", conns
    finally:
        server.close()
        await server.wait_closed()


async def read_request(r: asyncio.StreamReader) -> None:
    await r.readuntil(b"\r\n\r\n")


def ok(body: bytes, close: bool = False) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n"
        % (len(body), b"Connection: close\r\n" if close else b"")
    ) + body


def client(base_url: str, **kw: object) -> httpx.AsyncClient:
    c = httpx.AsyncClient(base_url=base_url, trust_env=False, **kw)  # type: ignore[arg-type]
    assert use_asyncio_streams(c)
    return c


def test_the_chat_client_is_built_on_them() -> None:
    """Fails when an httpx or httpcore release moves what use_asyncio_streams reaches (it then changes nothing)."""
    c = SGLangClient("http://127.0.0.1:9")
    assert isinstance(c._http._transport._pool._network_backend, AsyncioBackend)  # type: ignore[attr-defined]


async def test_kept_connection_reused_and_a_closed_one_replaced() -> None:
    async def keep(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await read_request(r)
            w.write(ok(b"hello"))
            await w.drain()

    async with serve(keep) as (url, conns), client(url) as c:
        assert [(await c.get("/")).text for _ in range(2)] == ["hello", "hello"]
        assert len(conns) == 1

    async def one_then_close(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(ok(b"once"))  # no Connection: close, then the server ends it anyway (an idle timeout)
        await w.drain()

    async with serve(one_then_close) as (url, conns), client(url) as c:
        assert (await c.get("/")).text == "once"
        await asyncio.sleep(0.2)  # the close arrives while the connection is idle in the pool
        assert (await c.get("/")).text == "once"
        assert len(conns) == 2


async def test_refused_timed_out_and_cut_short() -> None:
    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        await asyncio.sleep(5)

    async def cut(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
        await w.drain()

    async with serve(silent) as (url, _):
        port = int(url.rsplit(":", 1)[1])
    async with client(f"http://127.0.0.1:{port}") as c:  # the server is gone: nothing listens there now
        with pytest.raises(httpx.ConnectError):
            await c.get("/")
    async with serve(silent) as (url, _), client(url, timeout=httpx.Timeout(5.0, read=0.2)) as c:
        with pytest.raises(httpx.ReadTimeout):
            await c.get("/")
    async with serve(cut) as (url, _), client(url) as c:
        with pytest.raises(httpx.RemoteProtocolError):
            await c.get("/")


def self_signed(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a fresh certificate for 127.0.0.1, and a client context that trusts only it."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    (tmp / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    return server, ssl.create_default_context(cafile=str(tmp / "cert.pem"))


async def test_tls(tmp_path: Path) -> None:
    server_ctx, client_ctx = self_signed(tmp_path)

    async def hello(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(r)
        w.write(ok(b"over tls", close=True))
        await w.drain()

    async with serve(hello, tls=server_ctx) as (url, _):
        async with client(url, verify=client_ctx) as c:
            assert (await c.get("/")).text == "over tls"
        async with client(url) as c:  # the system's CAs do not trust the certificate
            with pytest.raises(httpx.ConnectError):
                await c.get("/")
