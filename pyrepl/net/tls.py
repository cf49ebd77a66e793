"""TLS contexts from the ``tls-*`` directives, as Redis's ``tlsConfigure`` builds them.

``build(config)`` returns a :class:`Contexts` pair or raises :class:`TlsError` with the line
Redis logs for the same mistake ("Failed to load certificate: …", "Either tls-ca-cert-file or
tls-ca-cert-dir must be specified …"). Building is atomic: the server swaps its contexts only
when the whole build succeeded, so a bad CONFIG SET leaves TLS as it was.

- ``server``: accepts clients and replicas on ``tls-port``. ``tls-auth-clients`` maps to the
  verify mode (``yes`` a client certificate is required, ``optional`` checked when sent, ``no``
  not asked for). Sessions are cached (``tls-session-caching``, ``-cache-size``,
  ``-cache-timeout``, session id context "redis"), renegotiation by the client is refused and
  ``tls-prefer-server-ciphers`` picks the server's cipher order.
- ``client``: the replication link to a master (``tls-replication``). It presents
  ``tls-client-cert-file``/``-key-file`` when both are set, else the server's pair, and checks
  the master's certificate against the CA but not its host name (as Redis: ``SSL_VERIFY_PEER``
  with no host check, no SNI).

Both take ``tls-protocols`` (default TLSv1.2 and TLSv1.3), ``tls-ciphers`` (TLSv1.2 and
below; OpenSSL's DEFAULT when unset, as Redis, not Python's own list) and ``tls-ciphersuites``
(TLSv1.3). Python's ``ssl`` module has no call for the TLSv1.3 cipher suites or the session
cache settings, so :class:`_OpenSSL` calls those few OpenSSL functions on the context's
``SSL_CTX`` through ctypes, after checking that the pointer it found is that context's.
"""

from __future__ import annotations

import ctypes
import os
import ssl
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyrepl.config import Config
    from pyrepl.replication.ports import ReplClient

#: tls-protocols tokens (case-insensitive), in order, with the option that disables each.
_PROTOCOLS = (("tlsv1", "OP_NO_TLSv1", ssl.TLSVersion.TLSv1),
              ("tlsv1.1", "OP_NO_TLSv1_1", ssl.TLSVersion.TLSv1_1),
              ("tlsv1.2", "OP_NO_TLSv1_2", ssl.TLSVersion.TLSv1_2),
              ("tlsv1.3", "OP_NO_TLSv1_3", ssl.TLSVersion.TLSv1_3))
DEFAULT_PROTOCOLS = frozenset({"tlsv1.2", "tlsv1.3"})

# OpenSSL's SSL_CTX_ctrl commands and session cache modes (ssl.h)
_CTRL_SET_SESS_CACHE_SIZE = 42
_CTRL_SET_SESS_CACHE_MODE = 44
_SESS_CACHE_OFF = 0
_SESS_CACHE_SERVER = 2


class TlsError(Exception):
    """TLS cannot be configured; the message is the line Redis logs."""


def enabled(config: Config) -> bool:
    """Redis configures TLS when it listens on a TLS port or replicates over TLS."""
    return bool(config.tls_port or config.tls_replication or config.tls_cluster)


def is_tls(c: ReplClient) -> bool:
    """Whether ``c`` is connected over TLS (its transport has an SSL object)."""
    t = c.transport
    return t is not None and t.get_extra_info("ssl_object") is not None


def parse_protocols(text: str) -> frozenset[str]:
    """parseProtocolsConfig: the enabled versions of a ``tls-protocols`` value."""
    if not text:
        return DEFAULT_PROTOCOLS
    names = {name for name, _, _ in _PROTOCOLS}
    chosen = set()
    for token in text.split(" "):
        t = token.lower()
        if t not in names:
            raise TlsError("Invalid tls-protocols specified. Use a combination of 'TLSv1', "
                           "'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.")
        chosen.add(t)
    return frozenset(chosen)


@dataclass(frozen=True)
class Contexts:
    server: ssl.SSLContext
    client: ssl.SSLContext


def build(config: Config) -> Contexts:
    """tlsConfigure: both contexts from the configuration, or TlsError."""
    cert, key = config.tls_cert_file, config.tls_key_file
    if not cert:
        raise TlsError("No tls-cert-file configured!")
    if not key:
        raise TlsError("No tls-key-file configured!")
    ca_file, ca_dir = config.tls_ca_cert_file, config.tls_ca_cert_dir
    if (config.tls_auth_clients != "no" or config.tls_cluster or config.tls_replication) \
            and not ca_file and not ca_dir:
        raise TlsError("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when "
                       "tls-cluster, tls-replication or tls-auth-clients are enabled!")
    protocols = parse_protocols(config.tls_protocols)
    server = _context(ssl.PROTOCOL_TLS_SERVER, config, protocols, cert, key,
                      config.tls_key_file_pass)
    server.verify_mode = {"no": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL}.get(
        config.tls_auth_clients, ssl.CERT_REQUIRED)
    if config.tls_prefer_server_ciphers:
        server.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        server.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE   # (Python sets it by default)
    if hasattr(ssl, "OP_NO_RENEGOTIATION"):
        server.options |= ssl.OP_NO_RENEGOTIATION
    lib = _OpenSSL(server)
    if config.tls_session_caching:
        lib.session_cache(_SESS_CACHE_SERVER, config.tls_session_cache_size,
                          config.tls_session_cache_timeout)
    else:
        lib.session_cache(_SESS_CACHE_OFF)
    if config.tls_dh_params_file:
        try:
            server.load_dh_params(config.tls_dh_params_file)
        except FileNotFoundError as e:
            raise TlsError(f"Failed to load {config.tls_dh_params_file}: {e.strerror}") from None
        except (OSError, ssl.SSLError) as e:
            raise TlsError(f"Failed to load DH params file: {config.tls_dh_params_file}: "
                           f"{_reason(e)}") from None
    if config.tls_client_cert_file and config.tls_client_key_file:
        cert, key = config.tls_client_cert_file, config.tls_client_key_file
        password = config.tls_client_key_file_pass
    else:
        password = config.tls_key_file_pass
    client = _context(ssl.PROTOCOL_TLS_CLIENT, config, protocols, cert, key, password)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_REQUIRED
    return Contexts(server, client)


def _context(kind: ssl._SSLMethod, config: Config, protocols: frozenset[str], cert: str,
             key: str, password: str) -> ssl.SSLContext:
    """createSSLContext: what the server and client contexts share."""
    ctx = ssl.SSLContext(kind)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
    with warnings.catch_warnings():       # the OP_NO_TLS* options are deprecated in Python,
        warnings.simplefilter("ignore", DeprecationWarning)   # not in OpenSSL or Redis
        for name, option, _ in _PROTOCOLS:
            if name not in protocols:
                ctx.options |= getattr(ssl, option)
    ctx.options |= ssl.OP_NO_COMPRESSION
    try:
        ctx.load_cert_chain(cert, key, password=password or None)
    except FileNotFoundError as e:
        which = cert if not os.path.exists(cert) else key
        what = "certificate" if which == cert else "private key"
        raise TlsError(f"Failed to load {what}: {which}: {e.strerror}") from None
    except (OSError, ssl.SSLError) as e:
        raise TlsError(f"Failed to load certificate: {cert}: {_reason(e)}") from None
    ca_file, ca_dir = config.tls_ca_cert_file, config.tls_ca_cert_dir
    if ca_file or ca_dir:
        try:
            ctx.load_verify_locations(cafile=ca_file or None, capath=ca_dir or None)
        except (OSError, ssl.SSLError) as e:
            raise TlsError(f"Failed to configure CA certificate(s) file/directory: "
                           f"{_reason(e)}") from None
    try:
        ctx.set_ciphers(config.tls_ciphers or "DEFAULT")
    except ssl.SSLError:
        raise TlsError(f"Failed to configure ciphers: {config.tls_ciphers}") from None
    if config.tls_ciphersuites and not _OpenSSL(ctx).set_ciphersuites(
            config.tls_ciphersuites):
        raise TlsError(f"Failed to configure ciphersuites: {config.tls_ciphersuites}")
    return ctx


def _reason(e: BaseException) -> str:
    return getattr(e, "reason", None) or getattr(e, "strerror", None) or str(e)


class _OpenSSL:
    """The OpenSSL calls Python's ssl module lacks, on one context's ``SSL_CTX``."""

    _lib: ctypes.CDLL | None = None

    def __init__(self, ctx: ssl.SSLContext) -> None:
        lib = self._library()
        # A PySSLContext starts with PyObject_HEAD and then its SSL_CTX pointer. Check that
        # pointer against the context: the options OpenSSL reports must be the context's.
        ptr = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
        if not ptr or lib.SSL_CTX_get_options(ptr) != int(ctx.options):
            raise TlsError("Failed to configure TLS: cannot reach this Python's OpenSSL context")
        self.lib = lib
        self.ptr = ptr

    @classmethod
    def _library(cls) -> ctypes.CDLL:
        if cls._lib is None:
            lib = ctypes.CDLL(ssl._ssl.__file__)   # type: ignore[attr-defined]  # libssl's symbols
            lib.SSL_CTX_get_options.argtypes = [ctypes.c_void_p]
            lib.SSL_CTX_get_options.restype = ctypes.c_uint64
            lib.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            lib.SSL_CTX_set_ciphersuites.restype = ctypes.c_int
            lib.SSL_CTX_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long,
                                         ctypes.c_void_p]
            lib.SSL_CTX_ctrl.restype = ctypes.c_long
            lib.SSL_CTX_set_timeout.argtypes = [ctypes.c_void_p, ctypes.c_long]
            lib.SSL_CTX_set_timeout.restype = ctypes.c_long
            lib.SSL_CTX_set_session_id_context.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                           ctypes.c_uint]
            lib.SSL_CTX_set_session_id_context.restype = ctypes.c_int
            cls._lib = lib
        return cls._lib

    def set_ciphersuites(self, suites: str) -> bool:
        return bool(self.lib.SSL_CTX_set_ciphersuites(self.ptr, suites.encode()))

    def session_cache(self, mode: int, size: int = 0, timeout: int = 0) -> None:
        self.lib.SSL_CTX_ctrl(self.ptr, _CTRL_SET_SESS_CACHE_MODE, mode, None)
        if mode != _SESS_CACHE_OFF:
            self.lib.SSL_CTX_ctrl(self.ptr, _CTRL_SET_SESS_CACHE_SIZE, size, None)
            self.lib.SSL_CTX_set_timeout(self.ptr, timeout)
            self.lib.SSL_CTX_set_session_id_context(self.ptr, b"redis", 5)
