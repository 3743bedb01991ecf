"""The one-way import rule (docs/architecture.md), checked on the source so it cannot drift.

Data flows hooks/collectors -> store -> analyzers -> faces; a module may import only its own
layer or lower ones. Imports inside functions count too (a lazy import is still an import).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: folder (relative to the repo root) -> (package name, layer). Lower numbers are lower layers.
LAYERS = {
    "triage": ("triage", 0),  # core: config, taxonomy, verdict, fault schedule
    "trainer_hooks": ("triage.trainer_hooks", 1),
    "collectors": ("triage.collectors", 1),
    "reference_trainer": ("triage.reference_trainer", 2),
    "triage/store": ("triage.store", 2),
    "analyzers": ("triage.analyzers", 3),
    "agent": ("triage.agent", 4),
    "dashboard": ("triage.dashboard", 4),
    "triage/supervisor": ("triage.supervisor", 4),
    "benchmarks": ("triage.benchmarks", 5),
    "triage/commands": ("triage.commands", 5),
}
#: Faces that may import anything of ours (the CLI entry point dispatches to every command).
UNRESTRICTED = {"triage/cli.py"}
#: Same-layer imports that would tangle parts that must stay independent.
FORBIDDEN_PAIRS = {
    ("triage.trainer_hooks", "triage.collectors"),
    ("triage.collectors", "triage.trainer_hooks"),
    ("triage.reference_trainer", "triage.store"),
}


def _layer_of_module(name: str) -> tuple[str, int] | None:
    best = None
    for pkg, layer in LAYERS.values():
        if (name == pkg or name.startswith(pkg + ".")) and (best is None or len(pkg) > len(best[0])):
            best = (pkg, layer)
    return best


def _owner(path: Path) -> tuple[str, int]:
    rel = path.relative_to(ROOT).as_posix()
    best = None
    for folder, (pkg, layer) in LAYERS.items():
        if rel.startswith(folder + "/") and (best is None or len(folder) > len(best[0])):
            best = (folder, pkg, layer)
    assert best, rel
    return best[1], best[2]


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for a in node.names:
                yield node.lineno, f"{node.module}.{a.name}"


def test_no_module_imports_a_higher_layer():
    bad = []
    for folder in LAYERS:
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel in UNRESTRICTED:
                continue
            pkg, layer = _owner(path)
            for lineno, mod in _imports(ast.parse(path.read_text(), rel)):
                target = _layer_of_module(mod)
                if target is None:
                    continue
                if target[1] > layer or (pkg, target[0]) in FORBIDDEN_PAIRS:
                    bad.append(
                        f"{rel}:{lineno} ({pkg}, layer {layer}) imports {mod} "
                        f"({target[0]}, layer {target[1]})"
                    )
    assert not bad, "imports against the one-way rule:\n" + "\n".join(bad)


def test_checker_catches_a_violation(tmp_path):
    tree = ast.parse("from triage.analyzers.x import f\nimport triage.config\n")
    found = [m for _, m in _imports(tree) if (_layer_of_module(m) or ("", -1))[1] > 2]
    assert "triage.analyzers.x" in found
