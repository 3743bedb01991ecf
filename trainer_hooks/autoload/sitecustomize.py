"""Loaded by Python at start-up in every process of an attempt that `triage run` starts with
auto-hooks on (this folder leads its PYTHONPATH). In a torchrun rank it instruments the rank
(`triage.trainer_hooks.auto`); anywhere else (torchrun itself, the keeper, a tool the script
runs) it only costs an environment lookup. A `sitecustomize` the environment had before is
still run, after ours. It never stops a process from starting: an import failure (a rank
running under another Python without Triage) leaves that rank to its logs, with one warning.
"""

import os
import sys


def _chain() -> None:
    """Run the next `sitecustomize` on sys.path, which this one shadows."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def _instrument() -> None:
    if os.environ.get("TRIAGE_AUTO_HOOKS") != "1" or "RANK" not in os.environ:
        return
    try:
        from triage.trainer_hooks.auto import install_from_env

        install_from_env()
    except Exception as exc:  # noqa: BLE001 - the job runs on, observed through its logs only
        print(
            f"triage: auto-instrumentation is off in this rank ({type(exc).__name__}: {exc})",
            file=sys.stderr,
            flush=True,
        )


_chain()
_instrument()
