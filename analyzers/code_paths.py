"""Which source files are the job's own code, told by their paths as a traceback or a stack
dump prints them: where a failure or a hang sits in the script rather than in a library, the
script is what to fix and the node it ran on is not to blame."""

from __future__ import annotations

import re

#: A frame in an installed package, the interpreter's library or Triage's own hooks: not the
#: job's code. What is left (the script, its own modules, `<stdin>`) is the job's.
_LIBRARY_PATH_RE = re.compile(
    r"[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d|^<frozen |[/\\]trainer_hooks[/\\]"
    # a path a thread shortened (`.../torch/distributed/distributed_c10d.py`) still names the
    # library it is in, as does a source checkout's (`/opt/ds/deepspeed/runtime/engine.py`); a
    # clone's `examples/` or `scripts/` (`/workspace/transformers/examples/...`) is the user's
    r"|[/\\](?:torch|deepspeed|transformers|accelerate|lightning|pytorch_lightning|numpy|jax|tensorflow)[/\\]"
    r"(?!examples[/\\]|scripts[/\\]|tests?[/\\])"
)
#: The reference trainer's fault injector: its frames stand for the hardware it simulates (a
#: stuck kernel, a lost GPU), not for code a user wrote.
_SIMULATED_FAULT_RE = re.compile(r"[/\\]reference_trainer[/\\]faults\.py$")
#: A stack dump's frame as the hooks write it: `path:line in function: code`.
_DUMP_FRAME_RE = re.compile(r"^(.*?):\d+ in ")


def is_library_path(path: str) -> bool:
    """Whether a frame's file is a library's (or the interpreter's, or Triage's hooks')."""
    return bool(_LIBRARY_PATH_RE.search(path))


#: The code of a frame that waits because the script said so: a sleep, a prompt, a loop of its
#: own, a thread or lock it waits on. Not a sync point (`.item()`, `.cpu()`, `synchronize`, a
#: collective's `.wait()`, a file read): the GPU, a peer or the storage may be what is stuck.
_SCRIPTED_WAIT_RE = re.compile(r"\bsleep\(|\binput\(|^\s*(?:while|for)\b|\.join\(|\.acquire\(|^\s*pass\s*$")


def dump_frame_waits_in_job_code(frame: str) -> bool:
    """Whether a stack dump's frame (`path:line in function: code`) is a wait the job's own code
    wrote (a sleep, a loop of its own, a join): not a library call, a simulated fault, nor a sync
    point where the GPU, a peer or the storage may be what never answers."""
    m = _DUMP_FRAME_RE.match(frame)
    if m is None:
        return False
    path = m.group(1)
    code = frame.split(": ", 1)[1] if ": " in frame else ""
    return (
        not is_library_path(path)
        and not _SIMULATED_FAULT_RE.search(path)
        and bool(_SCRIPTED_WAIT_RE.search(code))
    )
