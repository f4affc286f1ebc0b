#!/usr/bin/env python3
"""Run Python scripts as forked children of one process that has imported torch once.

Importing torch costs about 4 s of CPU here, and a fixture's own work a fraction of that: the
oracle runs ~700 scripts, so a fresh interpreter per script spends most of the suite importing.
A child forked from this server starts with torch already imported and otherwise as a fresh
`python SCRIPT` would: its own copy of every module (whatever the script changes, seeds, grad
mode, anomaly mode, `sys.modules`, dies with it), `__name__ == "__main__"`, `sys.argv[0]` and
`sys.path[0]` set to the script, the working directory the caller names, stdin from /dev/null.
The environment (PYTHONHASHSEED, PYTHONWARNINGS) is the server's, set by whoever starts it.
What differs: modules the server imported (torch, numpy and the standard library's) are already
imported, so a script cannot shadow them with a file of the same name, and environment
variables it sets before `import torch` do not reach torch's import.

Protocol (lines of JSON): request {"script", "cwd", "path": [extra sys.path entries], "timeout"}
-> reply {"returncode", "stdout", "stderr"}; a script past its timeout is killed and gets
returncode -9. The server exits at end of input.
"""
import atexit
import json
import os
import runpy
import sys
import tempfile
import threading
import time
import traceback

for name in ("torch", "torch.nn", "torch.nn.functional", "torch.optim", "numpy"):
    try:
        __import__(name)
    except ImportError:
        pass


def child(req, out_fd, err_fd):
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    sys.stdin = open(os.devnull)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    code = 0
    try:
        script = os.path.abspath(req["script"])
        os.chdir(req["cwd"])
        sys.argv = [script]
        extra = req.get("path", [])
        # The script's folder where the server's was, then PYTHONPATH's entries (exported too,
        # for processes the script starts).
        sys.path[0:1] = [os.path.dirname(script)] + extra
        if extra:
            os.environ["PYTHONPATH"] = os.pathsep.join(extra)
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        # What the interpreter does at exit: wait for threads, run atexit handlers.
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def run(req):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            child(req, out.fileno(), err.fileno())
        deadline = time.monotonic() + req.get("timeout", 120)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                code = -9
                break
            time.sleep(0.005)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode("utf-8", "replace"))
        return {"returncode": code, "stdout": texts[0], "stderr": texts[1]}


def main():
    for line in sys.stdin:
        if line.strip():
            sys.stdout.write(json.dumps(run(json.loads(line))) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
