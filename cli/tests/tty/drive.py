"""Runs a command on a pseudo-terminal (so its stdin is a TTY) and answers
the first `[y/N]` prompt it shows with ANSWER.

Usage: drive.py ANSWER CMD [ARGS...]. Prints everything the command wrote
(stdout and stderr share the terminal) and exits with its exit code. A
command silent for 120 s is killed (a hang is a failure, not a wait).
"""
import os
import pty
import select
import signal
import sys


def main():
    answer, cmd = sys.argv[1], sys.argv[2:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    out = b""
    answered = False
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            out += b"\n[drive.py: no output for 120 s, killed]\n"
            break
        try:
            data = os.read(fd, 4096)
        except OSError:  # the terminal closed: the command exited
            break
        if not data:
            break
        out += data
        if not answered and b"[y/N]" in out:
            os.write(fd, answer.encode() + b"\n")
            answered = True
    _, status = os.waitpid(pid, 0)
    sys.stdout.buffer.write(out)
    sys.exit(os.waitstatus_to_exitcode(status))


main()
