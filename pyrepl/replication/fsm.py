"""The move every replication state machine makes through its one table (shared helper, both
sides).

Theory of operation: each state machine (the master's per-replica link in ``master/states.py``,
the replica's in ``replica/states.py``, the rdb channel in ``replica/rdbchannel.py``) is an Enum of
states, an Enum of inputs and one table ``(state, input) -> next state``. :func:`step` is the
only way a machine moves: an input without an entry raises the machine's own typed error (never
a silent branch). :func:`from_every` writes the table rows that the diagrams draw as "any state
(but one) --input--> state".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import TypeVar

State = TypeVar("State")
Inp = TypeVar("Inp")


class Machine(Enum):
    """The base of every machine's states and inputs: a member hashes by identity, which is
    what its equality already is. (Enum's own ``__hash__`` is a Python function, and a
    replica's stream read makes two moves, each hashing a state and an input: ~0.3 us of a
    read that applies one SET in ~4 us.)"""

    __hash__ = object.__hash__


def step(table: Mapping[tuple[State, Inp], State], state: State, inp: Inp,
         error: Callable[..., Exception], *detail: str) -> State:
    """The state ``table`` moves ``state`` to on ``inp``; ``error(state, inp, *detail)`` is
    raised when it has no entry."""
    nxt = table.get((state, inp))
    if nxt is None:
        raise error(state, inp, *detail)
    return nxt


def from_every(states: Iterable[State], inputs: Iterable[Inp], target: State,
               but: State | None = None) -> dict[tuple[State, Inp], State]:
    """Table rows taking each of ``states`` (except ``but``) to ``target`` on each of
    ``inputs``."""
    ins = tuple(inputs)
    return {(s, i): target for s in states if s is not but for i in ins}
