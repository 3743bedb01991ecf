"""File writes the zero-code hooks time: `torch.save` to a path, safetensors' `save_file` (and
`save_model`, which calls it: Transformers' `save_pretrained`, Accelerate's `save_model`) and
`torch.distributed.checkpoint.save`.

A rank 0 that writes a model alone to slow storage, while its peers wait for it in a collective,
is saving, not hung; blocked on the storage it uses no CPU, so the stall rule's busy test cannot
tell, and the store must say so while the write lasts (`file_save_begin`, `file_save_end`).

The savers are wrapped once per process and stay wrapped while any monitor watches them (a
framework callback's monitor takes over from the zero-code one): a name bound to the wrapper
(`from safetensors.torch import save_file`, as Transformers binds it at import) reports to the
newest watching monitor and passes straight through when none is left; the module attributes
are put back when the last one leaves, unless something else wrapped them after us.
Only the main thread's writes count (a background upload, DCP's `async_save`, does not keep
the rank from its collectives), and a save inside another (safetensors' `save_model` calling
`save_file`, a DCP writer calling `torch.save`) is part of the outer one.
torch.distributed.checkpoint costs 0.36 s to import, so it is wrapped when the script imports
it (a post-import hook), never imported for the purpose.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any, Protocol

log = logging.getLogger(__name__)

_DCP = "torch.distributed.checkpoint"
#: Where a save call writes, from its (args, kwargs); None: not to a file (a buffer), not timed.
PathOf = Callable[[tuple[Any, ...], dict[str, Any]], "str | None"]


class SaveRecorder(Protocol):
    def file_save_started(self, path: str) -> float: ...

    def file_save_ended(self, path: str, started: float, error: BaseException | None = None) -> None: ...


_watchers: list[SaveRecorder] = []
_wrapped: list[tuple[types.ModuleType, str, Any, Any]] = []  # (module, name, original, wrapper)
_dcp_hook: _AfterImport | None = None
_inside = threading.local()
_lock = threading.Lock()


def watch(recorder: SaveRecorder) -> None:
    """`recorder` hears of every timed save from now on (the newest watcher only)."""
    global _dcp_hook
    with _lock:
        _watchers.append(recorder)
        if len(_watchers) > 1:
            return
        import torch

        _wrap([torch], "save", _file_arg(1, "f"))
        try:
            import safetensors.torch as safetensors_torch
        except ImportError:
            pass
        else:
            _wrap([safetensors_torch], "save_file", _file_arg(1, "filename"))
        if _DCP in sys.modules:
            _wrap_dcp(sys.modules[_DCP])
        else:
            _dcp_hook = _AfterImport(_DCP, _wrap_dcp)
            sys.meta_path.insert(0, _dcp_hook)


def unwatch(recorder: SaveRecorder) -> None:
    """`recorder` hears no more; the savers are put back once no one watches."""
    global _dcp_hook
    with _lock:
        if recorder in _watchers:
            _watchers.remove(recorder)
        if _watchers:
            return
        for module, name, original, wrapper in reversed(_wrapped):
            if getattr(module, name, None) is wrapper:  # else wrapped again after us: leave it
                setattr(module, name, original)
        _wrapped.clear()
        if _dcp_hook is not None:
            _dcp_hook.cancel()
            _dcp_hook = None


def _wrap(modules: Sequence[types.ModuleType], name: str, path_of: PathOf) -> None:
    """`modules`' `name` (one function, bound under that name in each) timed as a file write
    where `path_of` finds its destination."""
    original = getattr(modules[0], name)

    @functools.wraps(original)
    def save(*args: Any, **kwargs: Any) -> Any:
        recorder = _watchers[-1] if _watchers else None
        path = None if recorder is None or getattr(_inside, "saving", False) else path_of(args, kwargs)
        if path is None or threading.current_thread() is not threading.main_thread():
            return original(*args, **kwargs)
        assert recorder is not None
        started = recorder.file_save_started(path)
        _inside.saving = True
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            recorder.file_save_ended(path, started, exc)
            raise
        finally:
            _inside.saving = False
        recorder.file_save_ended(path, started)
        return result

    for module in modules:
        _wrapped.append((module, name, getattr(module, name), save))
        setattr(module, name, save)


def _wrap_dcp(package: types.ModuleType) -> None:
    """The package's `save` (what `dcp.save` calls), not `state_dict_saver.save`, which
    `async_save` runs in its background thread."""
    _wrap([package], "save", _dcp_destination)


def _file_arg(position: int, keyword: str) -> PathOf:
    def path_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        f = kwargs.get(keyword, args[position] if len(args) > position else None)
        return os.fspath(f) if isinstance(f, (str, os.PathLike)) else None

    return path_of


def _dcp_destination(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """A DCP save is a write wherever it goes: its checkpoint id, else its writer's path."""
    where = kwargs.get("checkpoint_id") or getattr(kwargs.get("storage_writer"), "path", None)
    return _DCP if where is None else str(where)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `then(module)` once module `name` has been executed, the first time only. The
    spec it returns carries a loader of its own around the real one (a loader object may be
    shared); a probe (`importlib.util.find_spec`) that loads nothing does not use it up."""

    def __init__(self, name: str, then: Callable[[types.ModuleType], None]) -> None:
        self.name, self.then = name, then
        self._finding = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self._finding:
            return None
        self._finding = True  # the other finders are asked below; not this one again
        try:
            spec = next(
                (
                    found
                    for finder in list(sys.meta_path)
                    if finder is not self and hasattr(finder, "find_spec")
                    for found in [finder.find_spec(fullname, path, target)]
                    if found is not None
                ),
                None,
            )
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ThenLoader(spec.loader, self._loaded)
        return spec

    def _loaded(self, module: types.ModuleType) -> None:
        self.cancel()
        try:
            self.then(module)
        except Exception:  # the script's own import must not fail for our sake
            log.warning(
                "triage: could not wrap %s's save; its writes are not timed", self.name, exc_info=True
            )

    def cancel(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


class _ThenLoader(importlib.abc.Loader):
    """A module's loader, with `then(module)` after it executes the module; everything else
    (source, resources) is the real loader's."""

    def __init__(self, loader: Any, then: Callable[[types.ModuleType], None]) -> None:
        self._loader, self._then = loader, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        created: types.ModuleType | None = self._loader.create_module(spec)
        return created

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)
