"""A job store without torch: the part of c10d's TCPStore that the job uses (set, get, add, check, wait,
multi_get, delete_key, num_keys), served by threads of rank 0, for ranks that load no torch (a `--backend
nccl` bench: importing torch costs each rank seconds before its first row).

One TCP connection per client. A request is a 4-byte length and a JSON object; values travel base64'd
(NCCL's unique IDs are binary). What arrives is bounded before it is read: a request over MAX_REQUEST
bytes closes that connection, and the server holds at most MAX_KEYS keys. `wait` blocks in the server,
on a condition, so a barrier's last arrival frees every waiter at once, as TCPStore's does.
"""
from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import time
from datetime import timedelta

MAX_REQUEST = 64 << 20  # bytes of one request: far above a job's largest gather, far below harm
MAX_KEYS = 1 << 20
_LEN = struct.Struct("!I")


class StoreTimeout(TimeoutError):
    """A wait or get gave up: the keys did not appear in time (TCPStore raises its own error then)."""


def _send(sock: socket.socket, obj) -> None:
    body = json.dumps(obj, separators=(",", ":")).encode()
    sock.sendall(_LEN.pack(len(body)) + body)


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the store's peer closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _receive(sock: socket.socket):
    (n,) = _LEN.unpack(_exactly(sock, _LEN.size))
    if n > MAX_REQUEST:
        raise ConnectionError(f"a store message of {n} bytes is over {MAX_REQUEST}")
    return json.loads(_exactly(sock, n))


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _seconds(timeout) -> float:
    return timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)


class StoreServer:
    """The keys, and a thread per client connection, on a listening socket the caller bound."""

    def __init__(self, listener: socket.socket):
        self._listener = listener
        self._data: dict[str, bytes] = {}
        self._changed = threading.Condition()
        self._closed = False
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, name="nb-store-accept", daemon=True).start()

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

    def num_keys(self) -> int:
        with self._changed:
            return len(self._data)

    def close(self) -> None:
        self._closed = True
        for s in [self._listener, *self._conns]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self._changed:
            self._changed.notify_all()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), name="nb-store-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while not self._closed:
                _send(conn, self._answer(_receive(conn)))
        except (OSError, ConnectionError, ValueError, KeyError, TypeError):
            pass  # the client left, or spoke nonsense: its connection ends, the store goes on
        finally:
            conn.close()

    def _answer(self, req: dict) -> dict:
        op, keys = req["op"], [str(k) for k in req.get("keys", [])]
        with self._changed:
            if op == "set":
                self._put(keys[0], base64.b64decode(req["value"]))
                return {}
            if op == "add":
                value = int(self._data.get(keys[0], b"0")) + int(req["value"])
                self._put(keys[0], str(value).encode())
                return {"value": value}
            if op == "check":
                return {"value": all(k in self._data for k in keys)}
            if op == "delete":
                found = self._data.pop(keys[0], None) is not None
                return {"value": found}
            if op == "num_keys":
                return {"value": len(self._data)}
            if op == "wait":  # also get and multi_get: wait, then the values
                end = time.monotonic() + float(req["timeout"])
                while not all(k in self._data for k in keys):
                    left = end - time.monotonic()
                    if left <= 0 or self._closed:
                        return {"timeout": True}
                    self._changed.wait(left)
                return {"values": [_b64(self._data[k]) for k in keys] if req.get("values") else []}
        raise ValueError(f"unknown store operation {op!r}")

    def _put(self, key: str, value: bytes) -> None:
        if key not in self._data and len(self._data) >= MAX_KEYS:
            raise ValueError("the store is full")
        self._data[key] = value
        self._changed.notify_all()


class StoreClient:
    """TCPStore's calls as the job makes them, over one connection (a lock keeps threads' requests whole)."""

    def __init__(self, addr: str, port: int, timeout: float):
        self.timeout = timeout
        self._sock = socket.create_connection((addr, port), timeout=max(timeout, 0.1))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._lock = threading.Lock()

    def _ask(self, req: dict, wait_s: float = 0.0) -> dict:
        with self._lock:
            self._sock.settimeout(max(self.timeout, wait_s) + 30.0)  # the server answers a wait when it ends
            _send(self._sock, req)
            return _receive(self._sock)

    @staticmethod
    def _bytes(value) -> bytes:
        return value.encode() if isinstance(value, str) else bytes(value)

    def set(self, key: str, value) -> None:
        self._ask({"op": "set", "keys": [key], "value": _b64(self._bytes(value))})

    def add(self, key: str, amount: int) -> int:
        return int(self._ask({"op": "add", "keys": [key], "value": int(amount)})["value"])

    def check(self, keys: list[str]) -> bool:
        return bool(self._ask({"op": "check", "keys": list(keys)})["value"])

    def delete_key(self, key: str) -> bool:
        return bool(self._ask({"op": "delete", "keys": [key]})["value"])

    def num_keys(self) -> int:
        return int(self._ask({"op": "num_keys"})["value"])

    def _wait(self, keys: list[str], timeout, values: bool) -> list[bytes]:
        seconds = self.timeout if timeout is None else _seconds(timeout)
        answer = self._ask({"op": "wait", "keys": list(keys), "timeout": seconds, "values": values}, seconds)
        if answer.get("timeout"):
            raise StoreTimeout(f"store keys not set within {seconds:g}s: {', '.join(keys[:3])}")
        return [base64.b64decode(v) for v in answer["values"]]

    def wait(self, keys: list[str], timeout=None) -> None:
        self._wait(keys, timeout, False)

    def get(self, key: str) -> bytes:
        return self._wait([key], None, True)[0]

    def multi_get(self, keys: list[str]) -> list[bytes]:
        return self._wait(keys, None, True)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
