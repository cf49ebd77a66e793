"""pyrepl's tests, a package so that every shared helper is a package import
(``from tests.support.procs import start_redis``): unit/, integration/, interop/, e2e/ and
analytics/ hold the tests, support/ the helpers they share."""
