"""The newcomer's path, run as the pages write it: the code blocks of the README's
"Your first automation, as a plugin" and of docs/getting-started.md are taken from the
files, saved under the names the prose gives, installed with pip into a fresh venv
beside Fleet (tests/support/venvs.py: Fleet and its dependencies only, whatever else is
installed in .venv), listed by ``fleet plugins`` and run: in-process, and by a worker
on a task submitted through a master, against a page this test serves."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.docs.blocks import Block, fenced_blocks, section
from tests.support.redis_server import free_port
from tests.support.venvs import make_venv, pip_install
from tests.support.waits import until_sync

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GETTING_STARTED = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
#: The page every example fetches: the demo site's front page.
DEMO_URL = "http://127.0.0.1:8765/"
TITLE = "Fleet's test page"

pytestmark = pytest.mark.slow


class Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"<html><head><title> {TITLE} </title></head><body>hi</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    """A local page with a title, served over real HTTP."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("docs-venv") / "venv")
    return python.parent


def user_env(venv_bin: Path, **extra: str) -> dict[str, str]:
    """A shell of a user with the venv active: its ``python`` and ``fleet`` first on
    PATH, no FLEET_* settings of this test run, plugins found by their entry points."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEET_")}
    env.pop("XDG_STATE_HOME", None)
    env["PATH"] = f"{venv_bin}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv_bin.parent)
    return {**env, **extra}


def shell(
    line: str, cwd: Path, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        line, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def shell_until(
    line: str,
    cwd: Path,
    env: dict[str, str],
    done: Callable[[subprocess.CompletedProcess[str]], bool],
    *,
    log: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run ``line`` again until ``done`` says its result is the one awaited."""

    def attempt() -> subprocess.CompletedProcess[str] | None:
        result = shell(line, cwd, env)
        return result if done(result) else None

    try:
        return until_sync(attempt, timeout=timeout, interval=0.4, what=line)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{log.read_text() if log else ''}") from None


def save_blocks(blocks: list[Block], folder: Path) -> list[str]:
    """Save every block the prose names a file for; the names saved."""
    saved = []
    for block in blocks:
        if block.file_name and block.lang in ("python", "toml"):
            (folder / block.file_name).write_text(block.text)
            saved.append(block.file_name)
    return saved


def install_line(blocks: list[Block]) -> str:
    """The page's ``pip install -e .``: run with the venv's pip, without build isolation
    (the build backend comes from the venv, so nothing is downloaded)."""
    lines = [line for b in blocks if b.lang == "bash" for line in b.lines()]
    assert "pip install -e ." in lines, lines
    return "pip install -e ."


def plugin_types(venv_bin: Path, cwd: Path) -> dict[str, str]:
    """``fleet plugins --json``: type -> where it came from."""
    out = shell("fleet plugins --json", cwd, user_env(venv_bin))
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout)
    assert listed["errors"] == []
    return {t["type"]: t["source"] for t in listed["types"]}


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_the_readme_plugin_installs_and_runs_as_written(
    venv_bin: Path, page_url: str, tmp_path: Path
) -> None:
    blocks = fenced_blocks(section(README, "## Your first automation, as a plugin"))
    bash = [line for b in blocks if b.lang == "bash" for line in b.lines()]
    env = user_env(venv_bin)

    # mkdir page-title && cd page-title: the checkout's folder is tmp_path here
    assert bash[0] == "mkdir page-title && cd page-title"
    assert shell("mkdir page-title", tmp_path, env).returncode == 0
    folder = tmp_path / "page-title"
    assert save_blocks(blocks, folder) == ["title_scraper.py", "pyproject.toml"]

    # in-process, before installing: against the page, and without any site there
    (run_line,) = [line for line in bash if line.startswith("python -m fleet run")]
    assert DEMO_URL in run_line
    ran = shell(run_line.replace(DEMO_URL, page_url), folder, env)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"url": page_url, "status": 200, "title": TITLE}
    closed = f"http://127.0.0.1:{free_port()}/"
    failed = shell(run_line.replace(DEMO_URL, closed), folder, env)
    assert failed.returncode == 1
    assert f"GET {closed} failed: ConnectError" in failed.stderr  # the error names the URL

    # pip install -e . ; fleet plugins
    pip_install(venv_bin / "python", "-e", ".", cwd=folder)
    install_line(blocks)
    assert "fleet plugins" in bash
    assert plugin_types(venv_bin, tmp_path)["page-title"].startswith("entry point")

    # cd .. ; fleet worker --type page-title, beside a master; fleet submit; fleet tail
    assert "cd .." in bash and "fleet worker --type page-title" in bash
    port = free_port()
    master_url = f"http://127.0.0.1:{port}"
    env = user_env(venv_bin, FLEET_MASTER_URL=master_url)
    procs = {}
    for name, line in (
        ("master", f"fleet master --port {port}"),
        ("worker", "fleet worker --type page-title"),
    ):
        with (tmp_path / f"{name}.log").open("w") as log:
            procs[name] = subprocess.Popen(
                shlex.split(line), cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
            )
    try:
        (submit,) = [line for line in bash if line.startswith("fleet submit page-title")]
        # the master comes up, and the worker publishes the type
        shell_until(submit.replace(DEMO_URL, page_url), tmp_path, env, lambda r: r.returncode == 0)
        (tail,) = [line for line in bash if line.startswith("fleet tail page-title")]
        out = shell_until(tail, tmp_path, env, lambda r: bool(r.stdout.strip()))
        assert json.loads(out.stdout.strip().splitlines()[-1]) == {
            "url": page_url, "status": 200, "title": TITLE,
        }  # fmt: skip
    finally:
        for proc in procs.values():
            stop(proc)
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in procs}
    # both use the checkout's fleet.db, and say so with its absolute path
    db = f"sqlite:///{tmp_path / 'fleet.db'}"
    assert f"(backend {db})" in logs["master"], logs["master"]
    assert re.search(rf"worker \S+ on {re.escape(db)} runs page-title", logs["worker"])


def test_the_getting_started_plugin_installs_and_runs_as_written(
    venv_bin: Path, tmp_path: Path
) -> None:
    blocks = fenced_blocks(section(GETTING_STARTED, "## 2. Write an automation"))
    blocks += fenced_blocks(section(GETTING_STARTED, "## 4. Make it a plugin"))
    env = user_env(venv_bin)
    saved = save_blocks(blocks, tmp_path)
    assert saved == ["hello.py"]
    (run_line,) = [
        line for b in blocks if b.lang == "bash" for line in b.lines() if "fleet run" in line
    ]
    ran = shell(run_line, tmp_path, env)
    assert ran.returncode == 1, ran.stderr  # "boom" is dead-lettered, as the page says
    assert ran.stdout.splitlines() == ['{"text":"hello ada"}']
    assert "dead-lettered after attempt 3: RuntimeError: no greeting for boom" in ran.stderr

    # the toml of section 4, saved beside hello.py (the page says so), then installed
    (toml,) = [b for b in blocks if b.lang == "toml"]
    assert "beside `hello.py`" in GETTING_STARTED
    (tmp_path / "pyproject.toml").write_text(toml.text)
    install_line(blocks)
    pip_install(venv_bin / "python", "-e", ".", cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert plugin_types(venv_bin, elsewhere)["greeter"].startswith("entry point")


def test_the_readme_batch_automation_runs(venv_bin: Path, tmp_path: Path) -> None:
    blocks = fenced_blocks(section(README, "## A batch automation, as a class"))
    (code,) = [b for b in blocks if b.lang == "python"]
    (tmp_path / "scraper_example.py").write_text(code.text)
    ran = shell(
        'python -m fleet run scraper --plugin scraper_example --payload \'{"url": "u"}\'',
        tmp_path,
        user_env(venv_bin),
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"url": "u", "status": 200}


def test_the_getting_started_fleet_dev_section_runs_as_written(
    venv_bin: Path, tmp_path: Path
) -> None:
    """Section 3: ``fleet dev --plugin hello`` in the folder of ``hello.py``, then, from
    another shell in the same folder, submit, tail, config set, and the curl of the
    same task. Only the port differs (a free one instead of 8000), passed the way the
    CLI reads it (``--port``, ``FLEET_MASTER_URL``)."""
    saved = save_blocks(
        fenced_blocks(section(GETTING_STARTED, "## 2. Write an automation")), tmp_path
    )
    assert saved == ["hello.py"]
    blocks = fenced_blocks(section(GETTING_STARTED, "## 3. Run it under a master and a worker"))
    dev_line, commands, curl = (b.text.strip() for b in blocks)
    assert dev_line == "fleet dev --plugin hello"
    port = free_port()
    env = user_env(venv_bin, FLEET_MASTER_URL=f"http://127.0.0.1:{port}")
    with (tmp_path / "dev.log").open("w") as log:
        dev = subprocess.Popen(
            [*shlex.split(dev_line), "--port", str(port)],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        submit, tail, config = commands.splitlines()
        # the master comes up, and the worker publishes the type
        shell_until(submit, tmp_path, env, lambda r: r.returncode == 0, log=tmp_path / "dev.log")
        out = shell_until(tail, tmp_path, env, lambda r: bool(r.stdout.strip()))
        assert json.loads(out.stdout.strip().splitlines()[-1]) == {"text": "hello grace"}
        changed = shell(config, tmp_path, env)
        assert changed.returncode == 0, changed.stdout + changed.stderr
        posted = shell(curl.replace("127.0.0.1:8000", f"127.0.0.1:{port}"), tmp_path, env)
        assert posted.returncode == 0, posted.stderr
        assert json.loads(posted.stdout)["queued"] is True
    finally:
        stop(dev)


def test_the_readme_five_line_task_runs_as_written(
    venv_bin: Path, page_url: str, tmp_path: Path
) -> None:
    """``titles.py`` and ``ask.py`` saved as the README names them; ``fleet worker
    --plugin titles`` in that folder; ``python ask.py`` prints the page's title; the
    sync form and a failing URL as the prose says."""
    blocks = fenced_blocks(section(README, "## A task in five lines"))
    assert save_blocks(blocks, tmp_path) == ["titles.py", "ask.py"]
    code = (tmp_path / "titles.py").read_text()
    assert len([line for line in code.splitlines() if line.strip()]) <= 7  # "five lines"
    (worker_line,) = [line for b in blocks if b.lang == "bash" for line in b.lines()]
    assert worker_line == "fleet worker --plugin titles"
    ask = (tmp_path / "ask.py").read_text()
    assert DEMO_URL in ask
    (tmp_path / "ask.py").write_text(ask.replace(DEMO_URL, page_url))
    env = user_env(venv_bin)
    with (tmp_path / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            shlex.split(worker_line), cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        asked = shell("python ask.py", tmp_path, env)
        assert asked.returncode == 0, asked.stderr + (tmp_path / "worker.log").read_text()
        assert asked.stdout.strip() == TITLE
        # the sync form the prose names, and a URL that fails: TaskFailed with the error
        closed = f"http://127.0.0.1:{free_port()}/"
        sync = (
            "from titles import fetch_title\n"
            f"print(fetch_title.delay(url={page_url!r}).result(timeout=30))\n"
            "from fleet.core import TaskFailed\n"
            "try:\n"
            f"    fetch_title.options(max_attempts=1).delay(url={closed!r}).result(timeout=30)\n"
            "except TaskFailed as exc:\n"
            "    print('failed:', exc)\n"
        )
        (tmp_path / "sync.py").write_text(sync)
        ran = shell("python sync.py", tmp_path, env)
        assert ran.returncode == 0, ran.stderr
        first, second = ran.stdout.strip().splitlines()
        assert first == TITLE
        assert second.startswith("failed: the task failed: ConnectError"), second
    finally:
        stop(worker)
    assert "fetch-title (from --plugin titles)" in (tmp_path / "worker.log").read_text()
