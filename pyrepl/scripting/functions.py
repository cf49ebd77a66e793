"""Redis 7 functions: the library registry and the functions engine's Lua state (functions.c,
function_lua.c of Redis 7.0.15).

Theory of operation: a library is a code text whose first line is ``#!lua name=<lib>``; loading
it (FUNCTION LOAD, an RDB's ``RDB_OPCODE_FUNCTION2`` entry, FUNCTION RESTORE) compiles the
rest in the functions engine's own Lua state (not EVAL's: SCRIPT FLUSH leaves it alone) and
runs it once with a restricted environment: only ``redis.register_function``,
``redis.log``/``LOG_*`` and the version fields exist, every other name is Redis's
"nonexistent global variable" error (``sandbox.BOOTSTRAP``'s ``load_lib``), and a run longer
than 500 ms stops with "FUNCTION LOAD timeout" (no limit for a master's or an RDB's load). The
callbacks it registers become :class:`Function` s of the :class:`Library`; the library is
linked into a :class:`LibrarySet` only when everything succeeded (compile, registration, at
least one function, no function name taken by another library), so a failed load changes
nothing, and a failed ``REPLACE`` keeps the old library. Function names are looked up
case-insensitively (Redis's ``functionDictType``), library names are exact.

FCALL runs a callback through the same machinery as EVAL (``ScriptEngine.fcall``: the same
pseudo-client, checks, conversions, effects replication), with the keys and the arguments as
the callback's two parameters. The order of FUNCTION LIST and FUNCTION DUMP is Redis's dict
order there (random per process); here it is the order of loading.

The RDB hooks (:func:`rdb_libraries`, :func:`prepare_libraries`, :func:`install_libraries`)
let the RDB writers and readers carry the libraries without importing the command layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyrepl.rdb.decoder import RdbError
from pyrepl.resp.reader import split_args
from pyrepl.scripting import cache as sc

ENGINE = b"LUA"
LOAD_TIMEOUT_MS = 500
NAME_ERR = ("Library names can only contain letters, numbers, or underscores(_) and must be at "
            "least one character long")
CHUNK = b"@user_function"
_NAME_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class FunctionLoadError(Exception):
    """A library could not be loaded; ``str(e)`` is Redis's text (without the "ERR ")."""


def valid_name(name: bytes) -> bool:
    """functionsVerifyName: [a-zA-Z0-9_]+."""
    return bool(name) and all(b in _NAME_BYTES for b in name)


def flag_names(flags: int) -> list[str]:
    """The flags in Redis's order (scripts_flags_def)."""
    return [n.decode() for n, bit in sc.FLAG_NAMES.items() if flags & bit]


def _je(n: int) -> int:
    """jemalloc's size class of an n-byte allocation (zmalloc_size)."""
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) // 16 * 16
    step = 1 << (n.bit_length() - 3)
    return (n + step - 1) // step * step


def _sds(n: int) -> int:
    """sdsZmallocSize of an n-byte sds string."""
    hdr = 1 if 0 < n < 32 else 3 if n < 256 else 5 if n < 65536 else 9
    return _je(hdr + n + 1)


@dataclass(slots=True, eq=False)
class Function:
    name: bytes
    func: Any                 # the Lua callback
    flags: int
    desc: bytes | None
    library: Library

    def memory(self) -> int:
        """functionMallocSize: functionInfo, its name and description, the Lua ref's ctx."""
        return _je(40) + _sds(len(self.name)) + (
            _sds(len(self.desc)) if self.desc is not None else 0) + 8


@dataclass(slots=True, eq=False)
class Library:
    name: bytes
    code: bytes
    functions: dict[bytes, Function] = field(default_factory=dict)

    def memory(self) -> int:
        """libraryMallocSize: functionLibInfo, its name and code."""
        return _je(32) + _sds(len(self.name)) + _sds(len(self.code))


class LibrarySet:
    """functionsLibCtx: the libraries by name, their functions by (case-folded) name, the
    engine's counts and the structures' memory."""

    def __init__(self) -> None:
        self.libraries: dict[bytes, Library] = {}
        self.functions: dict[bytes, Function] = {}
        self.n_functions = 0
        self.cache_memory = 0

    def link(self, lib: Library) -> None:
        for fn in lib.functions.values():
            self.functions.setdefault(fn.name.lower(), fn)
            self.cache_memory += fn.memory()
        self.libraries[lib.name] = lib
        self.cache_memory += lib.memory()
        self.n_functions += len(lib.functions)

    def unlink(self, lib: Library) -> None:
        for fn in lib.functions.values():
            self.functions.pop(fn.name.lower(), None)
            self.cache_memory -= fn.memory()
        del self.libraries[lib.name]
        self.cache_memory -= lib.memory()
        self.n_functions -= len(lib.functions)

    def join(self, src: LibrarySet, replace: bool) -> None:
        """libraryJoin: add ``src``'s libraries; on a collision (a library without
        ``replace``, or a function of another library) nothing changes."""
        replaced: list[Library] = []
        try:
            for lib in src.libraries.values():
                old = self.libraries.get(lib.name)
                if old is not None:
                    if not replace:
                        raise FunctionLoadError(
                            f"Library {_text(lib.name)} already exists")
                    self.unlink(old)
                    replaced.append(old)
            for key, fn in src.functions.items():
                if key in self.functions:
                    raise FunctionLoadError(f"Function {_text(fn.name)} already exists")
        except FunctionLoadError:
            for old in replaced:
                self.link(old)
            raise
        for lib in src.libraries.values():
            self.link(lib)


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def parse_metadata(code: bytes) -> tuple[bytes, bytes, bytes]:
    """functionExtractLibMetaData: (engine, library name, code after the shebang line)."""
    if not code.startswith(b"#!"):
        raise FunctionLoadError("Missing library metadata")
    end = code.find(b"\n")
    nul = code.find(b"\0")
    if end < 0 or 0 <= nul < end:
        raise FunctionLoadError("Invalid library metadata")
    parts = split_args(code[:end])
    if not parts:
        raise FunctionLoadError("Invalid library metadata")
    engine = parts[0][2:]
    name: bytes | None = None
    for part in parts[1:]:
        if part[:5].lower() == b"name=":
            if name is not None:
                raise FunctionLoadError("Invalid metadata value, name argument was given "
                                        "multiple times")
            name = part[5:]
            continue
        raise FunctionLoadError(f"Invalid metadata value given: {_text(part)}")
    if name is None:
        raise FunctionLoadError("Library name was not given")
    return engine, name, code[end:]


class Functions:
    """The functions engine: its Lua state and the current libraries."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.vm = engine.boot(True, {b"register": self._register,
                                     b"load_expired": self._load_expired})
        self.current = LibrarySet()
        self._loading: Library | None = None
        self._deadline_ns = 0

    # -- lookups ---------------------------------------------------------------------------
    def lookup(self, name: bytes) -> Function | None:
        return self.current.functions.get(name.lower())

    def codes(self) -> list[bytes]:
        """The libraries' codes, as rdbSaveFunctions and FUNCTION DUMP write them."""
        return [lib.code for lib in self.current.libraries.values()]

    # -- loading ---------------------------------------------------------------------------
    def _register(self, name: bytes, func: Any, flags: Any, desc: bytes | None) -> bytes | None:
        """redis.register_function's registration (functionLibCreateFunction): None, or the
        error text the Lua side raises."""
        lib = self._loading
        if lib is None:
            return b"redis.register_function can only be called on FUNCTION LOAD command"
        if not valid_name(name):
            return NAME_ERR.encode()
        if name in lib.functions:
            return b"Function already exists in the library"
        bits = 0
        for flag in flags.values():
            bits |= sc.FLAG_NAMES[flag]
        lib.functions[name] = Function(name, func, bits, desc, lib)
        return None

    def _load_expired(self) -> bool:
        return bool(self._deadline_ns) and \
            self.engine.core.clock_ns() > self._deadline_ns

    def create(self, code: bytes, replace: bool, timeout_ms: int,
               libs: LibrarySet | None = None) -> bytes:
        """functionsCreateWithLibraryCtx: load ``code`` into ``libs`` (the current set by
        default); the library's name, or FunctionLoadError."""
        target = self.current if libs is None else libs
        engine_name, name, body = parse_metadata(code)
        if not valid_name(name):
            raise FunctionLoadError(NAME_ERR)
        if engine_name.upper() != ENGINE:
            raise FunctionLoadError(f"Engine '{_text(engine_name)}' not found")
        old = target.libraries.get(name)
        if old is not None and not replace:
            raise FunctionLoadError(f"Library '{_text(name)}' already exists")
        if old is not None:
            target.unlink(old)
        try:
            lib = self._compile(name, code, body, timeout_ms)
            if not lib.functions:
                raise FunctionLoadError("No functions registered")
            for fn in lib.functions.values():
                if fn.name.lower() in target.functions:
                    raise FunctionLoadError(f"Function {_text(fn.name)} already exists")
        except FunctionLoadError:
            if old is not None:
                target.link(old)
            raise
        target.link(lib)
        return name

    def _compile(self, name: bytes, code: bytes, body: bytes, timeout_ms: int) -> Library:
        """luaEngineCreate: compile ``body`` and run it to collect its functions."""
        vm = self.vm
        func = vm.compile(body, CHUNK)
        if type(func) is tuple:
            msg = func[1]
            text = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
            raise FunctionLoadError(f"Error compiling function: {text}")
        lib = Library(name, code)
        eng = self.engine
        self._loading = lib
        self._deadline_ns = (eng.core.clock_ns() + timeout_ms * 1_000_000) if timeout_ms else 0
        saved = eng.use_vm(vm)
        try:
            res = vm.load_lib(func, timeout_ms > 0)
        finally:
            eng.restore_vm(saved)
            self._loading = None
            self._deadline_ns = 0
            vm.hook_on = False           # load_lib cleared the state's hook
        if type(res) is tuple and not res[0]:
            msg = res[1]
            text = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
            raise FunctionLoadError(f"Error registering functions: {text}")
        return lib

    # -- FUNCTION DELETE / FLUSH / RESTORE -------------------------------------------------
    def delete(self, name: bytes) -> bool:
        lib = self.current.libraries.get(name)
        if lib is None:
            return False
        self.current.unlink(lib)
        return True

    def flush(self) -> None:
        self.current = LibrarySet()

    def restore(self, codes: list[bytes], policy: str) -> None:
        """FUNCTION RESTORE: load ``codes`` into a new set, then FLUSH (the new set replaces
        the current one), APPEND or REPLACE (libraryJoin)."""
        libs = LibrarySet()
        for code in codes:
            self.create(code, False, 0, libs)
        if policy == "flush":
            self.current = libs
        else:
            self.current.join(libs, policy == "replace")

    # -- INFO memory -----------------------------------------------------------------------
    def vm_memory(self) -> int:
        """used_memory_vm_functions: the functions engine's Lua state."""
        return int(self.vm.gc_count() * 1024)

    def overhead(self) -> int:
        """used_memory_functions (functionsMemoryOverhead): the engines dict (one entry),
        the functions dict, the context, the libraries' and functions' structures, the
        engine's own structures."""
        cur = self.current
        n = len(cur.functions)
        slots = 1 << max(2, (n - 1).bit_length()) if n else 0
        engines = 24 + 4 * 8
        engine_cache = _je(24) + _sds(len(ENGINE)) + _je(64) + _je(8)
        return engines + n * 24 + slots * 8 + 32 + cur.cache_memory + engine_cache


#: used_memory_functions of a server without libraries (Redis 7.0.15's figure)
EMPTY_OVERHEAD = 200
#: used_memory_vm_functions of a fresh functions engine in Redis 7.0.15
EMPTY_VM = 43008


# -- the RDB hooks (callable from the RDB writers / readers: no command-layer import) --------

def _engine(core: Any, create: bool) -> Any:
    from pyrepl.scripting.engine import engine_of
    return engine_of(core, create)


def rdb_libraries(core: Any) -> list[bytes]:
    """The codes of the core's libraries, for an RDB's RDB_OPCODE_FUNCTION2 entries."""
    eng = _engine(core, False)
    if eng is None or eng._functions is None:
        return []
    return eng.functions.codes()


def prepare_libraries(core: Any, codes: list[bytes]) -> LibrarySet | None:
    """Load an RDB's libraries into a new set (nothing changes on the server yet); RdbError
    with Redis's "Failed loading library" text when one cannot be loaded."""
    if not codes:
        return None
    fns = _engine(core, True).functions
    libs = LibrarySet()
    for code in codes:
        try:
            fns.create(code, False, 0, libs)
        except FunctionLoadError as e:
            raise RdbError(f"Failed loading library, {e}") from None
    return libs


def merge_libraries(core: Any, libs: LibrarySet | None, replace: bool) -> None:
    """Add ``libs`` (from :func:`prepare_libraries`) to the server's libraries (DEBUG RELOAD
    NOFLUSH: MERGE replaces a library of the same name); FunctionLoadError on a collision
    without ``replace``, nothing changed."""
    if libs is not None:
        _engine(core, True).functions.current.join(libs, replace)


def install_libraries(core: Any, libs: LibrarySet | None) -> None:
    """Make ``libs`` (from :func:`prepare_libraries`) the server's libraries, replacing all
    (a full sync's or a restart's RDB: the functions it does not hold are gone)."""
    eng = _engine(core, libs is not None)
    if eng is None:
        return
    if libs is None:
        if eng._functions is not None:
            eng.functions.flush()
        return
    eng.functions.current = libs
