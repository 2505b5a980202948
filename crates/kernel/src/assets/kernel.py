# The kernel loop of mpa-kernel (written to the kernel's private directory at start).
#
# Protocol with the host:
# - the host writes each cell on the protocol descriptor (the original stdin) as
#   "<length>\n<json {"code": ...}>";
# - the cell's own output goes to stdout/stderr as it is produced (raw);
# - when the cell ends the loop writes "\n<sentinel>\n" to stderr, then the result frame
#   "\n<sentinel> <length>\n<json>" to stdout; the host reads both.
# - when the parent-death pipe reports end of file (the host is gone) the whole process group
#   is killed.
import json
import linecache
import os
import signal
import sys
import threading
import traceback

SENTINEL = os.environ.get("MOVIEPILOT_KERNEL_SENTINEL", "")
PARENT_FD = int(os.environ.get("MOVIEPILOT_KERNEL_PARENT_FD", "-1"))


def _write_all(fd, data):
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _watch_parent():
    try:
        while os.read(PARENT_FD, 1):
            pass
    except OSError:
        pass
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL)
    finally:
        os._exit(137)


def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


def _finish(result):
    _flush()
    _write_all(2, ("\n" + SENTINEL + "\n").encode())
    data = json.dumps(result).encode()
    _write_all(1, b"\n" + SENTINEL.encode() + b" " + str(len(data)).encode() + b"\n" + data)


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(str(code) + "\n")
    return 1


def main():
    if PARENT_FD >= 0:
        threading.Thread(target=_watch_parent, daemon=True).start()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    # The cell protocol keeps the original stdin; scripts and their children read /dev/null.
    proto = os.fdopen(os.dup(0), "rb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(os.devnull, "r")
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec("from moviepilot_tools import *", namespace)
    count = 0
    while True:
        header = proto.readline()
        if not header:
            return
        request = json.loads(proto.read(int(header)))
        count += 1
        name = "<cell-%d>" % count
        code = request.get("code", "")
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        result = {"status": "ok"}
        try:
            exec(compile(code, name, "exec"), namespace)
        except SystemExit as exc:
            status = _exit_code(exc)
            _finish({"status": "exit", "exit_code": status})
            os._exit(status)
        except BaseException as exc:
            traceback.print_exc()
            result = {
                "status": "error",
                "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:],
            }
        _finish(result)


main()
