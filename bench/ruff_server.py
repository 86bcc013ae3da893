"""What a long-lived `ruff server` would save the fix: ruff's two kinds of run on one file's text, each as the fix runs
it (a process per run) and as one server started once would answer it (the Language Server Protocol over stdio).

    python bench/ruff_server.py [FILE] [--repeat N]

FILE defaults to transformers 4.37.2's `models/llama/modeling_llama.py` (`bench/run.py` downloads the release). The
runs are interleaved, and each server request sends the whole text first, as a fix's every text is new to ruff:
- `ruff format --range` of lines 101 to 141, against `textDocument/rangeFormatting` of the same lines;
- `ruff check --output-format json`, against `textDocument/diagnostic`.
It prints the median of each in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from run import corpus

_DEADLINE_S = 10  # for each answer of the server: a server that stops answering ends the bench, not hangs it


class Server:
    """A `ruff server` process, spoken to over its standard input and output."""

    def __init__(self, ruff: str, folder: Path) -> None:
        self.process = subprocess.Popen(
            [ruff, "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.next_id = 0
        self.buffer = b""
        workspace = {"uri": folder.as_uri(), "name": folder.name}
        capabilities = {"textDocument": {"diagnostic": {}, "rangeFormatting": {}}}
        self.ask(
            "initialize", {"processId": os.getpid(), "capabilities": capabilities, "workspaceFolders": [workspace]}
        )
        self.tell("initialized", {})

    def tell(self, method: str, params: dict) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def ask(self, method: str, params: dict | None = None) -> object:
        self.next_id += 1
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        self._send(request if params is None else {**request, "params": params})
        while True:
            message = self._receive()
            if message.get("id") == self.next_id and "method" not in message:
                if "error" in message:
                    sys.exit(f"ruff server: {method}: {message['error']}")
                return message.get("result")
            if "id" in message and "method" in message:  # the server's own request: no answer is as good as any
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})

    def close(self) -> None:
        self.ask("shutdown")
        self.tell("exit", {})
        self.process.wait(timeout=_DEADLINE_S)

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.process.stdin.flush()

    def _receive(self) -> dict:
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lengths = [
            int(value)
            for name, _, value in (line.partition(b":") for line in head.split(b"\r\n"))
            if name.strip().lower() == b"content-length"
        ]
        if not lengths:
            sys.exit("ruff server: an answer without its length")
        while len(self.buffer) < lengths[0]:
            self._read()
        body, self.buffer = self.buffer[: lengths[0]], self.buffer[lengths[0] :]
        return json.loads(body)

    def _read(self) -> None:
        """More of the server's output, read from its pipe directly: a buffered reader's readline would hold bytes
        that `select` no longer sees."""
        descriptor = self.process.stdout.fileno()
        if not select.select([descriptor], [], [], _DEADLINE_S)[0]:
            self.process.kill()
            sys.exit(f"ruff server: no answer in {_DEADLINE_S} s")
        data = os.read(descriptor, 1 << 16)
        if not data:
            sys.exit("ruff server: it ended")
        self.buffer += data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=51)
    arguments = parser.parse_args()
    path = (arguments.file or corpus() / "transformers" / "models" / "llama" / "modeling_llama.py").resolve()
    ruff = shutil.which("ruff")
    if ruff is None:
        sys.exit("ruff is not on the PATH: pip install '.[test]'")
    text = path.read_text(encoding="utf-8")
    stdin_name = f"--stdin-filename={path}"
    runs = {
        "format --range, a run": [ruff, "format", "--quiet", "--range", "101-142", stdin_name, "-"],
        "check, a run": [ruff, "check", "--output-format", "json", "--quiet", stdin_name, "-"],
    }
    server = Server(ruff, path.parent)
    document = {"uri": path.as_uri()}
    server.tell(
        "textDocument/didOpen", {"textDocument": {**document, "languageId": "python", "version": 0, "text": text}}
    )
    lines = {"start": {"line": 100, "character": 0}, "end": {"line": 141, "character": 0}}
    requests = {
        "format --range, the server": (
            "textDocument/rangeFormatting",
            {"range": lines, "options": {"tabSize": 4, "insertSpaces": True}},
        ),
        "check, the server": ("textDocument/diagnostic", {}),
    }
    times: dict[str, list[float]] = {name: [] for name in [*runs, *requests]}
    answers: dict[str, str] = {}  # what each gave, last time: that both did the work
    for version in range(1, arguments.repeat + 1):
        for name, command in runs.items():
            start = time.perf_counter()
            output = subprocess.run(command, input=text, capture_output=True, text=True, check=False).stdout
            times[name].append(time.perf_counter() - start)
            answers[name] = _said(json.loads(output) if "check" in name else output != text)
        for name, (method, params) in requests.items():
            start = time.perf_counter()
            changed = {"textDocument": {**document, "version": version}, "contentChanges": [{"text": text}]}
            server.tell("textDocument/didChange", changed)
            answer = server.ask(method, {"textDocument": document, **params})
            times[name].append(time.perf_counter() - start)
            answers[name] = _said(answer["items"] if "check" in name else bool(answer))
    server.close()
    print(f"{path} ({len(text):,} characters), medians of {arguments.repeat}:")
    for name, measured in times.items():
        print(f"  {name:28s} {statistics.median(measured) * 1000:6.2f} ms   {answers[name]}")


def _said(answer: list | bool) -> str:
    """A check's findings counted, or whether a format changed the lines."""
    if isinstance(answer, bool):
        return "changes the lines" if answer else "leaves the lines as they are"
    return f"{len(answer)} findings"


if __name__ == "__main__":
    main()
