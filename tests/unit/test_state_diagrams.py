"""Each state machine's docstring diagram against its transition table: the diagram a reader
follows is the table the code moves by.

Every machine (the AOF's, the master's per-replica link, the replica's link, the rdb channel)
draws its table in its module docstring's ``::`` block. Here, for each: every state and every
input of the table is named in the diagram, and every upper-case name in the diagram is a
state or input of the machine (a renamed or removed one shows). The AOF's and the master
link's diagrams are one arrow a line (``A, B --IN / IN2 (note)--> C``, chained arrows, ``any``
for every other state), so their arrows are compared with the table row for row."""

from __future__ import annotations

import re
from enum import Enum
from types import ModuleType

import pytest

from pyrepl.aof import states as aof_states
from pyrepl.replication.master import states as master_states
from pyrepl.replication.replica import rdbchannel
from pyrepl.replication.replica import states as replica_states

# module, its states, its inputs, its table, whether its arrows are compared one by one
MACHINES = {
    "aof": (aof_states, aof_states.AofState, aof_states.AofInput, aof_states.TRANSITIONS, True),
    "master-link": (master_states, master_states.SlaveState, master_states.LinkInput,
                    master_states.TRANSITIONS, True),
    "replica": (replica_states, replica_states.ReplState, replica_states.Input,
                replica_states.TRANSITIONS, False),
    "rdb-channel": (rdbchannel, rdbchannel.RdbChState, rdbchannel.RdbChInput,
                    rdbchannel.TRANSITIONS, False),
}


def diagram(module: ModuleType) -> str:
    """The ``::`` block of the module's docstring."""
    doc = module.__doc__ or ""
    head, sep, rest = doc.partition("::\n")
    assert sep, f"{module.__name__}: no diagram"
    lines = []
    for line in rest.split("\n")[1:]:
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return "\n".join(lines)


# Redis's own words the notes quote (commands, REPLCONF ACK), and its replies (+WORD).
REDIS_WORDS = {"CONFIG", "SET", "REPLCONF", "ACK", "PSYNC", "SYNC"}


def names(text: str) -> set[str]:
    """The upper-case names in a diagram (words of capitals, digits and underscores) but
    Redis's own words that notes quote."""
    text = re.sub(r"\+[A-Z]+", "", text)
    return set(re.findall(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b", text)) - REDIS_WORDS


ARROW = re.compile(r"--(?P<inputs>[^-]+?)-->\s*(?P<dst>[A-Z_]+)")


def arrows(text: str, states: type[Enum]) -> set[tuple[str, str, str]]:
    """(state, input, next) for every arrow of a one-arrow-a-line diagram."""
    out = set()
    for line in text.split("\n"):
        line = re.sub(r"\s{2,}\(.*$", "", line.strip())   # a trailing note in parentheses
        m = ARROW.search(line)
        if m is None:
            continue
        srcs = [s.strip() for s in re.split(r"[,/]", line[:m.start()])]
        for m in ARROW.finditer(line):
            ins = [i.strip().split(" (")[0] for i in m.group("inputs").split("/")]
            dst = m.group("dst")
            every = [s.name for s in states if s.name != dst] if srcs == ["any"] else srcs
            out |= {(s, i, dst) for s in every for i in ins}
            srcs = [dst]
    return out


@pytest.mark.parametrize("name", list(MACHINES))
def test_the_diagram_names_what_the_table_moves_by(name: str) -> None:
    module, states, inputs, table, _ = MACHINES[name]
    drawn = names(diagram(module))
    used = {s.name for s, _ in table} | {s.name for s in table.values()} | \
        {i.name for _, i in table}
    assert used - drawn == set(), f"in the table, not in the diagram: {used - drawn}"
    known = {s.name for s in states} | {i.name for i in inputs}
    assert drawn - known == set(), f"in the diagram, no such state or input: {drawn - known}"


@pytest.mark.parametrize("name", [n for n, m in MACHINES.items() if m[4]])
def test_the_arrows_are_the_table(name: str) -> None:
    module, states, _, table, _ = MACHINES[name]
    rows = {(s.name, i.name, t.name) for (s, i), t in table.items()}
    assert arrows(diagram(module), states) == rows


def test_the_parser_sees_a_wrong_arrow() -> None:
    """A diagram that draws one row wrong does not pass (the check can fail)."""
    states = aof_states.AofState
    good = diagram(aof_states)
    rows = {(s.name, i.name, t.name) for (s, i), t in aof_states.TRANSITIONS.items()}
    assert arrows(good, states) == rows
    bad = good.replace("WAIT_REWRITE --FAILED--> OFF", "WAIT_REWRITE --FAILED--> ON")
    assert arrows(bad, states) != rows
