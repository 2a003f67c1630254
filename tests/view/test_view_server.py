"""The live page's server over real HTTP on loopback, and the command line."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys

import pytest

from foundry.store import read_evaluations
from foundry.view.model import RunReader
from foundry.view.server import ViewServer
from view_run import ROOT


@pytest.fixture
def server(view_run_dir):
    run_dir, hostile = view_run_dir
    srv = ViewServer(RunReader(run_dir), host="127.0.0.1", port=0)
    srv.start_in_thread()
    yield srv, run_dir, hostile
    srv.shutdown()
    srv.server_close()


def get(srv, path, host=None):
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=20)
    conn.request("GET", path, headers={"Host": host} if host else {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def test_the_page_and_its_endpoints(server):
    srv, run_dir, hostile = server
    resp, body = get(srv, "/")
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/html")
    csp = resp.getheader("Content-Security-Policy")
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp and "connect-src 'self'" in csp
    assert b'"mode":"live"' in body
    total = len(read_evaluations(run_dir))
    resp, body = get(srv, "/api/update?since=0")
    update = json.loads(body)
    assert resp.status == 200 and update["total"] == total == len(update["rows"])
    resp, body = get(srv, f"/api/update?since={total - 1}")
    assert [row[0] for row in json.loads(body)["rows"]] == [hostile["error"]]
    resp, body = get(srv, f"/api/kernel?id={hostile['script']}")
    assert resp.status == 200 and json.loads(body)["candidate"]["task_id"] == "relu"


def test_bad_requests_are_refused(server):
    srv, _, _ = server
    assert get(srv, "/api/update?since=-1")[0].status == 400
    assert get(srv, "/api/kernel?id=nope")[0].status == 404
    assert get(srv, "/etc/passwd")[0].status == 404
    # a page elsewhere reaching this server through a name rebound to 127.0.0.1
    assert get(srv, "/api/update?since=0", host="attacker.example:80")[0].status == 403
    assert get(srv, "/", host="localhost")[0].status == 200


def test_the_command_serves_and_writes_report_html(view_run_dir, tmp_path):
    run_dir, _ = view_run_dir
    proc = subprocess.Popen([sys.executable, "-m", "foundry.view", str(run_dir)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line
        url = line.split("http://", 1)[1].split("/", 1)[0]
        host, port = url.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=20)
        conn.request("GET", "/api/update?since=0")
        assert json.loads(conn.getresponse().read())["total"] == len(read_evaluations(run_dir))
        conn.close()
    finally:
        proc.terminate()
        proc.wait(20)
    out = subprocess.run([sys.executable, "-m", "foundry.view", str(run_dir), "--html", str(tmp_path / "r.html")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and (tmp_path / "r.html").stat().st_size > 10_000, out.stderr
    bad = subprocess.run([sys.executable, "-m", "foundry.view", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not a run directory" in bad.stderr
