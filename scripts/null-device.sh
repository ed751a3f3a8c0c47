#!/usr/bin/env bash
# /dev/null must be the null device. On some machines (this project's CI
# among them) it is a regular file: every `>/dev/null` then fills it, and
# every read of it returns that text. Cargo runs its rustc probe with
# standard input from /dev/null, so the probe failed ("failed to run rustc
# to learn about target-specific information", with the text of some earlier
# redirect as its source) and no test ran. Sourced by ./test and .ci/run.
if [ ! -c /dev/null ]; then
  was="$(stat -c %F /dev/null 2>&1 || true)"
  if [ "$(id -u)" = 0 ] && rm -f /dev/null && mknod -m 666 /dev/null c 1 3; then
    echo "== /dev/null was a $was: recreated as the null device"
  else
    echo "error: /dev/null is not the null device (it is a regular file): every redirect to it fills it, and cargo's rustc probe reads it." >&2
    echo "  = hint: as root: rm -f /dev/null && mknod -m 666 /dev/null c 1 3" >&2
    exit 1
  fi
fi
