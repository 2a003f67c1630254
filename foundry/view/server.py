"""The live page's HTTP server (the standard library's threading server).

    GET /                          the page (it polls the two endpoints below)
    GET /api/update?since=N        evaluations after the first N, the tasks they touched,
                                   the run-wide panels (Snapshot.update)
    GET /api/kernel?id=EVAL_ID     one evaluation's kernel panel (kernel.detail_json)

Read-only: nothing is written to the run directory. Bound to loopback (the default), it
answers only requests whose Host is a loopback name, so a web page elsewhere cannot read
the run through a DNS name rebound to 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from foundry.view.jsonsafe import dumps
from foundry.view.kernel import detail_json
from foundry.view.model import RunReader
from foundry.view.page import content_security_policy, page_html

log = logging.getLogger("foundry.view")
POLL_S = 3.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str:
    """The host part of a Host header ("[::1]:8080" -> "::1", "localhost:80" -> "localhost")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].split("]", 1)[0]
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reader: RunReader, *, host: str = "127.0.0.1", port: int = 0, poll_s: float = POLL_S):
        self.reader = reader
        self.poll_s = float(poll_s)
        self.loopback_only = is_loopback(host)
        super().__init__((host, port), ViewHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def start_in_thread(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="foundry-view", daemon=True)
        t.start()
        return t


class ViewHandler(BaseHTTPRequestHandler):
    server: ViewServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: bytes, content_type: str, *, csp: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        if csp:
            self.send_header("Content-Security-Policy", csp + "; frame-ancestors 'none'")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value, status: int = HTTPStatus.OK) -> None:
        self._send(status, dumps(value).encode("utf-8"), "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json({"error": message}, status)

    def do_HEAD(self) -> None:  # noqa: N802 - the base class's naming
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        if self.server.loopback_only and not is_loopback(_host_name(self.headers.get("Host", ""))):
            self._error(HTTPStatus.FORBIDDEN, "this server answers only requests made to a loopback address")
            return
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        try:
            if url.path == "/":
                page = page_html(title=f"KernelFoundry: {self.server.reader.path.name}",
                                 config={"mode": "live", "poll_s": self.server.poll_s})
                self._send(HTTPStatus.OK, page.encode("utf-8"), "text/html; charset=utf-8",
                           csp=content_security_policy(live=True))
            elif url.path == "/api/update":
                since = query.get("since", ["0"])[0]
                if not since.isdigit():
                    self._error(HTTPStatus.BAD_REQUEST, "since: expected a number of evaluations")
                    return
                snap = self.server.reader.snapshot()
                if int(since) == 0:
                    self._send(HTTPStatus.OK, snap.first_update_json, "application/json; charset=utf-8")
                else:
                    self._json(snap.update(int(since)))
            elif url.path == "/api/kernel":
                snap = self.server.reader.snapshot()
                record = snap.by_eval.get(query.get("id", [""])[0])
                if record is None:
                    self._error(HTTPStatus.NOT_FOUND, "no evaluation with that id in this run")
                    return
                self._json(detail_json(record, snap.by_candidate))
            else:
                self._error(HTTPStatus.NOT_FOUND, f"no such page: {url.path}")
        except (BrokenPipeError, ConnectionResetError):
            pass
