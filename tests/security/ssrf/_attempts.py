"""The SSRF corpus: each entry one request through the http handler, aimed at the canary.

``{c}`` in a URL is the canary's port (127.0.0.1 and ::1 listen on the same one).
``allowed.test`` resolves to the stand-in public address; ``rebind.test`` answers
from the entry's script, one answer per lookup (the last one repeated).

``expect`` is what the handler must do:

* ``"refused"``: it raises ``destination_not_allowed`` before any connection;
* ``"failed"``: a failed result (cannot resolve, no route) and nothing reached;
* an ``int``: the stand-in public server answered with that status, and it alone
  was reached (a redirect is returned, never followed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from tests.security.ssrf._net import PUBLIC_IP

__all__ = ["ATTEMPTS", "FAMILIES", "NAMES", "Attempt"]

# Names the stub resolver knows besides localhost: public services that answer with
# the address written in the name, and a cloud's metadata name.
NAMES: dict[str, list[str]] = {
    "127.0.0.1.nip.io": ["127.0.0.1"],
    "127-0-0-1.sslip.io": ["127.0.0.1"],
    "localtest.me": ["127.0.0.1", "::1"],
    "169.254.169.254.nip.io": ["169.254.169.254"],
    "metadata.google.internal": ["169.254.169.254"],
}

Expect = Literal["refused", "failed"] | int


@dataclass(frozen=True)
class Attempt:
    family: str
    url: str
    expect: Expect
    method: str = "GET"
    rebind: tuple[tuple[str, ...], ...] = ()  # rebind.test's answers, one per lookup
    env: dict[str, str] = field(default_factory=dict)

    def target(self, canary_port: int) -> str:
        return self.url.replace("{c}", str(canary_port))


ATTEMPTS: dict[str, Attempt] = {}


def _add(
    family: str,
    expect: Expect,
    *urls: str,
    method: str = "GET",
    rebind: tuple[tuple[str, ...], ...] = (),
    env: dict[str, str] | None = None,
) -> None:
    for url in urls:
        name = f"{family}: {url!r}"
        if method != "GET":
            name += f" {method}"
        if rebind:
            name += " answers " + " then ".join("+".join(a) or "nothing" for a in rebind)
        if env:
            name += " " + " ".join(f"{k}={v}" for k, v in env.items())
        assert name not in ATTEMPTS, name
        ATTEMPTS[name] = Attempt(family, url, expect, method, rebind, dict(env or {}))


# --- literal addresses that are not public -------------------------------------------
_add("literal", "refused",
     "http://127.0.0.1:{c}/", "http://127.0.0.2:{c}/", "http://127.255.255.254:{c}/",
     "http://10.0.0.1:{c}/", "http://172.16.0.1:{c}/", "http://192.168.0.1:{c}/",
     "http://169.254.169.254:{c}/latest/meta-data/", "http://100.64.0.1:{c}/",
     "http://100.127.255.254:{c}/", "http://224.0.0.1:{c}/", "http://0.0.0.0:{c}/",
     "http://255.255.255.255:{c}/", "http://198.18.0.1:{c}/", "http://192.0.0.1:{c}/",
     "http://240.0.0.1:{c}/", "http://[::1]:{c}/", "http://[::]:{c}/",
     "http://[0:0:0:0:0:0:0:1]:{c}/", "http://[fe80::1]:{c}/", "http://[fc00::1]:{c}/",
     "http://[fd00::2]:{c}/", "http://[fec0::1]:{c}/", "http://[ff02::1]:{c}/",
     "http://[2001:db8::1]:{c}/", "http://[100::1]:{c}/",
     "http://[fd00:ec2::254]/latest/meta-data/",  # AWS's IPv6 metadata service
     "http://100.100.100.200/latest/meta-data/",  # Alibaba's metadata service (CGNAT)
     "http://192.0.0.192/opc/v2/instance/")  # Oracle's  # fmt: skip

# --- IPv4 spelled another way: glibc reads these as 127.0.0.1 / 0.0.0.0 --------------
_add("ipv4 spelling", "refused",
     "http://2130706433:{c}/", "http://0x7f000001:{c}/", "http://017700000001:{c}/",
     "http://0x7f.1:{c}/", "http://0x7f.0.0.1:{c}/", "http://127.1:{c}/", "http://127.0.1:{c}/",
     "http://0177.0.0.1:{c}/", "http://0127.0.0.1:{c}/", "http://127.000.000.001:{c}/",
     "http://0:{c}/", "http://0x0:{c}/", "http://2852039166:{c}/",
     "http://127.0.0.1.:{c}/")  # fmt: skip

# --- IPv6 addresses that carry a non-public IPv4 address ----------------------------
_add("ipv6 embedding", "refused",
     "http://[::ffff:127.0.0.1]:{c}/", "http://[::ffff:7f00:1]:{c}/",
     "http://[0:0:0:0:0:ffff:127.0.0.1]:{c}/", "http://[::ffff:169.254.169.254]:{c}/",
     "http://[::ffff:0:127.0.0.1]:{c}/", "http://[::ffff:0.0.0.0]:{c}/",
     "http://[2002:7f00:1::]:{c}/", "http://[2002:7f00:1::1]:{c}/",
     "http://[2002:a9fe:a9fe::]:{c}/", "http://[2002:a00:1::]:{c}/",
     "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{c}/",  # Teredo, client 127.0.0.1
     "http://[2001:0:4136:e378:0:0:5601:5356]:{c}/",  # Teredo, client 169.254.169.254
     "http://[2001:0:7f00:1::]:{c}/",  # Teredo, server 127.0.0.1
     "http://[64:ff9b::7f00:1]:{c}/", "http://[64:ff9b::127.0.0.1]:{c}/",
     "http://[64:ff9b::a9fe:a9fe]:{c}/", "http://[64:ff9b:1::7f00:1]:{c}/",
     "http://[64:ff9b:1::808:808]:{c}/", "http://[::127.0.0.1]:{c}/",
     "http://[::7f00:1]:{c}/", "http://[::FFFF:7F00:1]:{c}/", "http://::1:{c}/")  # fmt: skip

# --- zone ids ------------------------------------------------------------------------
_add("zone id", "refused",
     "http://[fe80::1%25lo]:{c}/", "http://[::1%25lo]:{c}/", "http://[::1%251]:{c}/",
     "http://[fe80::1%25eth0]:{c}/", "http://[::1%lo]:{c}/",
     "http://[fe80::1%eth0]:{c}/")  # fmt: skip

# --- URL parser confusion --------------------------------------------------------------
_add("userinfo", "refused",
     "http://allowed.test@127.0.0.1:{c}/", "http://allowed.test:80@127.0.0.1:{c}/",
     "http://allowed.test\\@127.0.0.1:{c}/", "http://127.0.0.1:{c}\\@allowed.test/",
     "http://allowed.test&@127.0.0.1:{c}/", "http://allowed.test;@127.0.0.1:{c}/",
     "http://allowed.test%40127.0.0.1:{c}/", "http://@127.0.0.1:{c}/",
     "http://allowed.test@@127.0.0.1:{c}/", "http://127.0.0.1:{c}:@allowed.test/")  # fmt: skip
_add("fragment and query", 404, "http://allowed.test#@127.0.0.1:{c}/",
     "http://allowed.test?@127.0.0.1:{c}/")  # fmt: skip
_add("fragment and query", "refused", "http://127.0.0.1:{c}#@allowed.test/",
     "http://127.0.0.1:{c}?@allowed.test/", "http://127.0.0.1:{c}/#allowed.test")  # fmt: skip
_add("backslash", "refused",
     "http://127.0.0.1:{c}\\allowed.test/", "http:\\\\127.0.0.1:{c}/", "http:/\\127.0.0.1:{c}/",
     "http:/127.0.0.1:{c}/", "http:127.0.0.1:{c}/", "http:///127.0.0.1:{c}/")  # fmt: skip
_add("scheme", "refused",
     "HTTP://127.0.0.1:{c}/", "hTtP://[::1]:{c}/", "HTTPS://127.0.0.1:{c}/",
     "ftp://127.0.0.1:{c}/", "gopher://127.0.0.1:{c}/_GET", "file:///etc/passwd",
     "dict://127.0.0.1:{c}/")  # fmt: skip
# Dots and digits that IDNA folds to ASCII (httpx does; the policy compares as written).
_add("unicode", "refused",
     "http://127\u30020\u30020\u30021:{c}/",  # ideographic full stop
     "http://127\uff0e0\uff0e0\uff0e1:{c}/",  # fullwidth full stop
     "http://127\uff610\uff610\uff611:{c}/",  # halfwidth ideographic full stop
     "http://\uff11\uff12\uff17.\uff10.\uff10.\uff11:{c}/",  # fullwidth digits
     "http://\u2460\u2461\u2466.0.0.1:{c}/",  # circled digits
     "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3:{c}/",  # circled "localhost"
     "http://allowed\u3002test:{c}/",
     "http://\uff21\uff2c\uff2c\uff2f\uff37\uff25\uff24.test:{c}/")  # fmt: skip
_add("name", "refused",
     "http://localhost:{c}/", "http://LOCALHOST:{c}/", "http://localhost.:{c}/",
     "http://localhost.localdomain:{c}/", "http://ip6-localhost:{c}/",
     "http://127.0.0.1.nip.io:{c}/", "http://127-0-0-1.sslip.io:{c}/",
     "http://localtest.me:{c}/", "http://169.254.169.254.nip.io/",
     "http://metadata.google.internal/computeMetadata/v1/")  # fmt: skip
# The pool then names "allowed.test." itself: it reaches what that name resolves to, no more.
_add("name", 404, "http://allowed.test.:{c}/")
_add("control character", "refused",
     "http://127.0.0.1:{c}/\r\nX-Injected: 1", "http://allowed.test\n@127.0.0.1:{c}/",
     "http://127.0.0.1\x00.allowed.test:{c}/", " http://127.0.0.1:{c}/",
     "http://127.0.0.1\t:{c}/", "http://allowed.test:{c}/ HTTP/1.1\r\nHost: 127.0.0.1",
     "http://127.0.0.1:{c}/\x7f")  # fmt: skip
_add("percent-encoded host", "refused",
     "http://%31%32%37.0.0.1:{c}/", "http://%6c%6f%63%61%6c%68%6f%73%74:{c}/",
     "http://127.0.0.1%2f@allowed.test/", "http://[%3a%3a1]:{c}/")  # fmt: skip

# --- a proxy named in the environment (the canary, posing as one) ---------------------
for _name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
    _add("proxy environment", 200, "http://allowed.test:{c}/ok",
         env={_name: "http://127.0.0.1:{c}/"})  # fmt: skip

# --- DNS answers that change between the check and the connection -------------------
P = PUBLIC_IP
_REBIND: list[tuple[Expect, tuple[tuple[str, ...], ...]]] = [
    (200, ((P,), ("127.0.0.1",))),
    (200, ((P,), ("::1",))),
    (200, ((P,), ("::ffff:127.0.0.1",))),
    (200, ((P,), ("0.0.0.0",))),
    (200, ((P,), ("127.0.0.1",), (P,))),
    ("refused", (("127.0.0.1",), (P,))),
    ("refused", (("::1",), (P,))),
    ("refused", ((P, "127.0.0.1"),)),
    ("refused", (("127.0.0.1", P),)),
    ("refused", ((P, "::1"),)),
    ("refused", ((P, "::ffff:127.0.0.1"),)),
    ("refused", ((P, "169.254.169.254"),)),
    ("refused", ((P, "10.0.0.1"),)),
    ("refused", ((P, "0.0.0.0"),)),
    ("refused", ((P, "64:ff9b::7f00:1"),)),
    ("refused", (("2606:4700::1111%lo",),)),  # a public address with a zone id
    ("failed", ((),)),
]
for _expect, _script in _REBIND:
    _add("dns rebinding", _expect, "http://rebind.test:{c}/ok", rebind=_script)

# --- redirects from an allowlisted public server to the canary --------------------------
for _status in (301, 302, 303, 307, 308):
    for _form in ("absolute", "scheme-relative", "relative"):
        _add("redirect", _status, f"http://allowed.test:{{c}}/redirect/{_status}/{_form}")
for _form in ("absolute-v6", "mapped", "localhost", "unspecified", "decimal", "metadata",
              "userinfo", "backslash", "dot-relative"):  # fmt: skip
    _add("redirect", 302, f"http://allowed.test:{{c}}/redirect/302/{_form}")
for _status in (307, 308):
    _add("redirect", _status, f"http://allowed.test:{{c}}/redirect/{_status}/absolute",
         method="POST")  # fmt: skip
_add("redirect", 300, "http://allowed.test:{c}/redirect/300/absolute")
_add("redirect", 200, "http://allowed.test:{c}/refresh/absolute",
     "http://allowed.test:{c}/refresh/scheme-relative",
     "http://allowed.test:{c}/meta/absolute")  # fmt: skip

FAMILIES = sorted({a.family for a in ATTEMPTS.values()})
