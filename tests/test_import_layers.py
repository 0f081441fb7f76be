"""Imports run one way (docs/design.md, "Layout"; .importlinter): no module of gpu_cluster
reaches itself again through its imports. An import inside a function or under TYPE_CHECKING
counts as much as one at the top of a file, as it does for grimp and lint-imports."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import grimp
import pytest

PACKAGE = "gpu_cluster"
CONTRACTS = Path(__file__).resolve().parent.parent / ".importlinter"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, cache_dir=None)


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """The graph's strongly connected components (Tarjan's algorithm, without recursion)."""
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in imports:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(imports[root]))]
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(imports[child])))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                components.append(sorted(component))
    return components


def cycle_in(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    """One import circle through the component's first module, as a readable chain."""
    first, members = component[0], set(component)
    for imported in sorted(graph.find_modules_directly_imported_by(first) & members):
        chain = graph.find_shortest_chain(importer=imported, imported=first)
        if chain:
            return [first, *chain]
    return component


def test_the_graph_is_the_package(graph):
    assert f"{PACKAGE}.infra.cli" in graph.modules
    assert f"{PACKAGE}.components.cluster" in graph.modules


def test_no_import_cycles(graph):
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    found = "\n".join(
        f"  {len(c)} modules: {' -> '.join(cycle_in(graph, c))}\n    all: {', '.join(c)}"
        for c in cycles
    )
    assert not cycles, f"import cycles (modules that reach themselves through imports):\n{found}"


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("a", "a.b", "a.c", "a.d"):
        graph.add_module(module)
    graph.add_import(importer="a.b", imported="a.c")
    graph.add_import(importer="a.c", imported="a.b")
    graph.add_import(importer="a.d", imported="a.b")
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    assert cycles == [["a.b", "a.c"]]
    assert cycle_in(graph, cycles[0]) == ["a.b", "a.c", "a.b"]


def house_layers() -> list[set[str]]:
    """The modules of each layer of the house contract (.importlinter), top to bottom."""
    config = configparser.ConfigParser()
    config.read(CONTRACTS)
    lines = config["importlinter:contract:house"]["layers"].strip().splitlines()
    return [{name.strip("() ") for name in re.split(r"[|:]", line)} for line in lines]


def test_every_room_has_its_place_in_the_house(graph):
    """A new module or room of infra is placed in a layer, not left unchecked."""
    named = set().union(*house_layers())
    rooms = graph.find_children(f"{PACKAGE}.infra") | graph.find_children(PACKAGE)
    rooms -= {f"{PACKAGE}.infra"}
    assert not rooms - named, f"name these in .importlinter's house layers: {rooms - named}"
