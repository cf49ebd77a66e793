"""The AOF's state machine (Redis's aof_state: AOF_OFF, AOF_ON, AOF_WAIT_REWRITE).

Theory of operation: AOF is OFF, or ON (every write is appended to the last incr file), or
WAIT_REWRITE: ``CONFIG SET appendonly yes`` at run time forked a rewrite, and writes go to a
temporary incr file that becomes the first incr file once the rewrite's base is in place
(then ON). ::

    OFF --BOOT--> ON                (appendonly yes at start: the files are opened after load)
    OFF --ENABLE--> WAIT_REWRITE    (CONFIG SET appendonly yes, a replica after a full sync)
    WAIT_REWRITE --REWRITTEN--> ON  (the first rewrite installed its base)
    WAIT_REWRITE --FAILED--> OFF    (the rewrite could not even start)
    ON, WAIT_REWRITE --STOP--> OFF  (CONFIG SET appendonly no)
"""

from __future__ import annotations

from pyrepl.replication.fsm import Machine, from_every, step


class AofState(Machine):
    OFF = "off"
    ON = "on"
    WAIT_REWRITE = "wait_rewrite"


class AofInput(Machine):
    BOOT = "boot"
    ENABLE = "enable"
    REWRITTEN = "rewritten"
    FAILED = "failed"
    STOP = "stop"


S, In = AofState, AofInput

TRANSITIONS: dict[tuple[AofState, AofInput], AofState] = {
    (S.OFF, In.BOOT): S.ON,
    (S.OFF, In.ENABLE): S.WAIT_REWRITE,
    (S.WAIT_REWRITE, In.REWRITTEN): S.ON,
    (S.WAIT_REWRITE, In.FAILED): S.OFF,
    **from_every((S.ON, S.WAIT_REWRITE), (In.STOP,), S.OFF),
}


class AofStateError(Exception):
    def __init__(self, state: AofState, inp: AofInput) -> None:
        super().__init__(f"AOF: no move from {state.name} on {inp.name}")
        self.state = state
        self.input = inp


def move(state: AofState, inp: AofInput) -> AofState:
    return step(TRANSITIONS, state, inp, AofStateError)
