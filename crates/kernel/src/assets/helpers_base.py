# Helpers of mpa-kernel's `moviepilot_tools` module (the generated tool stubs follow).
# Each tool call goes to the host over its private Unix socket as one JSON line
# {"tool", "args", "token"}; the host answers one JSON line {"ok", "result" | "error"}.
import json as _json
import os as _os
import shlex as _shlex
import socket as _socket
import time as _time


class ToolRpcError(RuntimeError):
    """The host refused the call outright (no cell running, bad token, channel gone)."""


_SOCKET = _os.environ.get("MOVIEPILOT_RPC_SOCKET", "")
_TOKEN = _os.environ.get("MOVIEPILOT_RPC_TOKEN", "")
_PERSISTENT = _os.environ.get("MOVIEPILOT_RPC_PERSISTENT", "1") == "1"
_conn = None


def _connection():
    global _conn
    if _conn is None:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.connect(_SOCKET)
        _conn = (sock, sock.makefile("rb"))
    return _conn


def _drop():
    global _conn
    if _conn is not None:
        try:
            _conn[1].close()
            _conn[0].close()
        except OSError:
            pass
    _conn = None


def _call(tool, args):
    request = (_json.dumps({"tool": tool, "args": args, "token": _TOKEN}) + "\n").encode()
    line = b""
    for attempt in (0, 1):
        try:
            sock, reader = _connection()
            sock.sendall(request)
            line = reader.readline()
            if line:
                break
            _drop()
        except OSError:
            _drop()
        if attempt == 1 or not _PERSISTENT:
            raise ToolRpcError("the host's tool channel is unavailable")
    if not _PERSISTENT:
        _drop()
    reply = _json.loads(line)
    if not reply.get("ok"):
        raise ToolRpcError(reply.get("error", "refused by the host"))
    return reply.get("result")


def _args(**kwargs):
    return {k: v for k, v in kwargs.items() if v is not None}


def json_parse(text):
    """Parses JSON leniently: a byte-order mark and raw control characters in strings are fine."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    return _json.loads(text.lstrip("\ufeff"), strict=False)


def shell_quote(value):
    """Quotes one value for a POSIX shell command line."""
    return _shlex.quote(str(value))


def retry(fn, max_attempts=3, delay=2):
    """Calls fn() until it returns without raising, waiting delay, 2*delay, ... between attempts."""
    for attempt in range(max_attempts):
        try:
            return fn()
        except Exception:
            if attempt + 1 >= max_attempts:
                raise
            _time.sleep(delay * (2 ** attempt))
