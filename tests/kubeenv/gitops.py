"""Loopback servers a GitOps delivery path reads from, for Flux's controllers (tests/kubeenv/flux/):

- `GitServer`: a bare Git repository served by `git http-backend` (Git's own smart-HTTP server, a CGI
  program) behind a small Python HTTP server on 127.0.0.1, as a GitOps repository would be served;
  `commit(tree)` pushes a new commit of a working tree to it (a re-plan committed by the site);
- `HelmRepoServer`: the charts of ../shared/charts that a bundle's HelmRepositories name, packaged with
  `helm package` and indexed with `helm repo index`, served as a static Helm repository;
- `OciRegistry`: go-containerregistry's in-memory registry (built by tests/kubeenv/flux/build.sh), to
  which the charts the bundle's OCIRepositories name are pushed with `helm push`.
The URLs these serve replace the bundle's in the copy of the tree that is committed: tests/kubeenv/overlay.py
(rules 10 to 12) lists each rewrite and why.
"""
from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

from .cluster import free_port

GIT_ENV = {"GIT_AUTHOR_NAME": "orchgen test", "GIT_AUTHOR_EMAIL": "test@orchgen.invalid",
           "GIT_COMMITTER_NAME": "orchgen test", "GIT_COMMITTER_EMAIL": "test@orchgen.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}


def _git(*args: str, cwd: Path) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                       env={**os.environ, **GIT_ENV})
    if r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {r.stderr[-2000:]}")
    return r.stdout


def _serve(handler: type, port: int) -> http.server.ThreadingHTTPServer:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class GitServer:
    """`http://127.0.0.1:<port>/<name>.git`, a bare repository on branch main, read over Git's smart
    HTTP protocol (`git http-backend`), the protocol source-controller's Git client speaks."""

    def __init__(self, root: Path, name: str = "fleet"):
        self.root = root
        self.bare = root / "repos" / f"{name}.git"
        self.work = root / "checkout"
        self.bare.mkdir(parents=True)
        _git("init", "--bare", "-q", "-b", "main", str(self.bare), cwd=root)
        _git("config", "http.receivepack", "false", cwd=self.bare)
        self.work.mkdir()
        _git("init", "-q", "-b", "main", cwd=self.work)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{name}.git"
        project_root = str(root / "repos")

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _cgi(self) -> None:
                path, _, query = self.path.partition("?")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                env = {"GIT_PROJECT_ROOT": project_root, "GIT_HTTP_EXPORT_ALL": "1",
                       "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
                       "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                       "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
                       "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                       "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                       "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}
                r = subprocess.run(["git", "http-backend"], input=body, capture_output=True, env=env, timeout=120)
                head, _, payload = r.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode("latin-1").split("\r\n"):
                    k, _, v = line.partition(":")
                    if k.lower() == "status":
                        status = int(v.split()[0])
                    elif k:
                        headers.append((k, v.strip()))
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _cgi

        self.server = _serve(Handler, self.port)

    def commit(self, files: dict[str, Path], message: str) -> str:
        """Replace the checkout's tree with `files` (repository path -> a file or directory to copy
        there), commit and push to the served repository; returns the commit's hash."""
        for p in self.work.iterdir():
            if p.name != ".git":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        for dest, src in files.items():
            target = self.work / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, target) if src.is_dir() else shutil.copy(src, target)
        _git("add", "-A", ".", cwd=self.work)
        _git("commit", "-q", "-m", message, cwd=self.work)
        _git("push", "-q", str(self.bare), "main", cwd=self.work)
        return _git("rev-parse", "HEAD", cwd=self.work).strip()

    def stop(self) -> None:
        self.server.shutdown()


def _helm_env(helm_home: Path) -> dict[str, str]:
    return {**os.environ, **{k: str(helm_home / k.lower()) for k in
                             ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}}


def package(helm: Path, chart_dir: Path, out: Path, helm_home: Path) -> Path:
    """`helm package` of one chart of ../shared/charts (its dependencies are vendored in charts/)."""
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([str(helm), "package", str(chart_dir), "-d", str(out)], capture_output=True,
                       text=True, env=_helm_env(helm_home), timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"helm package {chart_dir}: {r.stderr[-2000:]}")
    return Path(r.stdout.strip().rsplit(" ", 1)[-1].strip())


class HelmRepoServer:
    """A static Helm repository (`index.yaml` + chart archives) at `http://127.0.0.1:<port>/<slug>/`,
    one folder per repository URL of the bundle."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        serve_dir = str(root)

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=serve_dir, **kw)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _serve(Handler, self.port)

    def add(self, helm: Path, slug: str, charts: list[Path], helm_home: Path) -> str:
        d = self.root / slug
        for c in charts:
            package(helm, c, d, helm_home)
        url = f"http://127.0.0.1:{self.port}/{slug}"
        r = subprocess.run([str(helm), "repo", "index", str(d), "--url", url], capture_output=True, text=True,
                           env=_helm_env(helm_home), timeout=120)
        if r.returncode != 0:
            raise AssertionError(f"helm repo index {d}: {r.stderr[-2000:]}")
        return url

    def stop(self) -> None:
        self.server.shutdown()


class OciRegistry:
    """go-containerregistry's in-memory registry on 127.0.0.1 (plain HTTP)."""

    def __init__(self, binary: Path, workdir: Path):
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        log = open(workdir / "oci-registry.log", "ab")
        self.proc = subprocess.Popen([str(binary), f"-port={self.port}"], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise TimeoutError("oci registry did not listen")

    def push(self, helm: Path, tgz: Path, repo_path: str, helm_home: Path) -> None:
        """`helm push <chart>.tgz oci://<host>/<repo_path>`: the chart lands at
        <host>/<repo_path>/<chart name>:<version>, as on its public registry."""
        r = subprocess.run([str(helm), "push", str(tgz), f"oci://{self.host}/{repo_path}", "--plain-http"],
                           capture_output=True, text=True, env=_helm_env(helm_home), timeout=300)
        if r.returncode != 0:
            raise AssertionError(f"helm push {tgz}: {r.stderr[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
