"""A command whose children try every way out of their parent's reach (test workload).

argv: MARKER SECONDS [EXIT_CODE]. Starts a child in its own session, which starts a grandchild
that double-forks and replaces itself with an empty-environment `sleep` (no TRIAGE_* left, not
a child of anything the launcher knows). Each process carries MARKER in its argv so a test can
find it. The main process exits with EXIT_CODE after SECONDS (or sleeps on when none is given).
"""

import os
import subprocess
import sys
import time


def main() -> None:
    marker, seconds = sys.argv[1], float(sys.argv[2])
    if len(sys.argv) > 4 and sys.argv[4] == "child":
        if os.fork() == 0:  # the grandchild: double fork, then wipe the environment
            os.setsid()
            if os.fork() == 0:
                os.execve("/bin/sh", ["/bin/sh", "-c", f"exec sleep 300 # {marker}"], {})
            os._exit(0)
        time.sleep(300)
        return
    subprocess.Popen([sys.executable, __file__, marker, str(seconds), "0", "child"], start_new_session=True)
    print(f"{marker} started", file=sys.stderr, flush=True)
    if len(sys.argv) > 3:
        time.sleep(seconds)
        sys.exit(int(sys.argv[3]))
    time.sleep(300)


if __name__ == "__main__":
    main()
