"""Serve the Streamlit reliability dashboard: fleet, job, ranks, GPU health and incident pages.

Runs `streamlit run` on the dashboard app of this package, headless (no browser is opened, no
usage statistics are sent), listening on --bind (loopback by default) and --port. The app reads
the store through fresh snapshots while agents write, and refreshes the open page on its own.
Pages are addressable: `/?page=job&job=ID`, `/?page=incident&job=ID&incident=0`.

Exit codes: 0 stopped cleanly (Ctrl-C or SIGTERM, which stop Streamlit too), 2 the data directory does not exist or the port is in
use; otherwise Streamlit's own exit status.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from triage.config import ConfigError, add_config_args, config_from_args, data_dir_from_env
from triage.dashboard import config as dashboard_config
from triage.dashboard.config import DashboardConfig
from triage.store import check_data_dir

#: The Streamlit script, found next to the installed package wherever it was installed.
APP = Path(dashboard_config.__file__).resolve().with_name("app.py")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_args(parser, DashboardConfig)


def check_port_free(bind: str, port: int) -> None:
    """ConfigError when nothing could listen on (bind, port), so the user gets one clear line
    instead of Streamlit's traceback after start-up."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((bind, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {bind} is in use; stop what listens there or pass another --port"
                ) from None
            raise ConfigError(
                f"cannot listen on {bind}:{port}: {exc.strerror}; pass another --bind or --port"
            ) from None


def streamlit_command(cfg: DashboardConfig) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        cfg.bind,
        "--server.port",
        str(cfg.port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(DashboardConfig, args)
    data_dir = check_data_dir(data_dir_from_env(cfg.data_dir)).resolve()
    check_port_free(cfg.bind, cfg.port)
    if not APP.is_file():
        raise ConfigError(f"the dashboard app is missing at {APP}; reinstall triage")
    env = {**os.environ, **cfg.to_env(), "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    print(
        f"triage dashboard: serving {data_dir} on http://{cfg.bind}:{cfg.port}/ (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    proc = subprocess.Popen(streamlit_command(cfg), env=env)
    stopped = []

    def stop(signum: int, _frame: object) -> None:
        """SIGTERM stops the server too: without this, a service manager or test that stops
        `triage dashboard` left Streamlit running, holding the port."""
        stopped.append(signum)
        proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        return 0
    return 0 if stopped else code
