"""No import in optimizer/ runs up docs/DESIGN.md's table of rooms: a module imports its own room,
the rooms below it and the ground floor (the modules directly in optimizer/, which import no
room). The table is read from the doc, so the doc and this test cannot drift apart. Every import
counts: at the top of a module, inside a function, under TYPE_CHECKING."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPTIMIZER = ROOT / "optimizer"
GROUND = "ground floor"


def rooms_top_down(design: str) -> list[str]:
    """The rooms of DESIGN.md's table, top floor first."""
    table = design[design.index("The rooms of `optimizer/`") :]
    table = table[: table.index("\n\n", table.index("| room |"))]
    return re.findall(r"^\| `optimizer/(\w+)/` \|", table, flags=re.MULTILINE)


def room_of(module: str) -> str | None:
    """The room of a dotted module name in optimizer/ (GROUND for a module directly in it);
    None outside optimizer/."""
    parts = module.split(".")
    if parts[0] != "optimizer":
        return None
    if len(parts) == 1 or not (OPTIMIZER / parts[1]).is_dir():
        return GROUND
    return parts[1]


def imported(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in `module` (read from `path`), wherever it stands;
    `from a import b` gives a.b as well as a (b may be a module)."""
    package = module.rsplit(".", 1)[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def upward_imports(rooms: list[str], modules: dict[str, Path]) -> list[str]:
    """Each import of `modules` (dotted name -> file) that runs up the table."""
    floor = {room: i for i, room in enumerate(rooms)} | {GROUND: len(rooms)}
    found = []
    for module, path in sorted(modules.items()):
        own = room_of(module)
        assert own is not None
        for line, target in imported(path, module):
            theirs = room_of(target)
            if theirs is None or theirs == own:
                continue
            if floor[theirs] < floor[own] or (own == GROUND and theirs != GROUND):
                found.append(f"{module}:{line} ({own}) imports {target} ({theirs})")
    return found


def optimizer_modules() -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in OPTIMIZER.rglob("*.py")}


def test_design_md_lists_every_room_of_optimizer_once():
    rooms = rooms_top_down((ROOT / "docs" / "DESIGN.md").read_text())
    assert len(rooms) == len(set(rooms))
    on_disk = {p.parent.name for p in OPTIMIZER.glob("*/__init__.py")}
    assert set(rooms) == on_disk


def test_no_module_in_optimizer_imports_a_room_above_its_own():
    rooms = rooms_top_down((ROOT / "docs" / "DESIGN.md").read_text())
    assert upward_imports(rooms, optimizer_modules()) == []


def test_an_import_up_the_table_is_found_wherever_it_stands(tmp_path):
    """The check sees a lazy import inside a function and a relative one, and the ground floor
    importing any room; reversing the table makes today's downward imports upward ones."""
    rooms = rooms_top_down((ROOT / "docs" / "DESIGN.md").read_text())
    assert rooms[0] == "run" and upward_imports(rooms[::-1], optimizer_modules())
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..run import loop\n    import optimizer.reporting.live\n")
    assert upward_imports(rooms, {"optimizer.decision.probe": probe}) == [
        "optimizer.decision.probe:2 (decision) imports optimizer.run (run)",
        "optimizer.decision.probe:2 (decision) imports optimizer.run.loop (run)",
        "optimizer.decision.probe:3 (decision) imports optimizer.reporting.live (reporting)",
    ]
    probe.write_text("from optimizer.decision import stats\n")
    assert upward_imports(rooms, {"optimizer.ground_probe": probe}) == [
        "optimizer.ground_probe:1 (ground floor) imports optimizer.decision (decision)",
        "optimizer.ground_probe:1 (ground floor) imports optimizer.decision.stats (decision)",
    ]
