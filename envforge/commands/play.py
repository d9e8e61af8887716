"""`envforge play`: play the model yourself (or from another program) through a local server that
speaks Anthropic's Messages API, so `envforge translate --model claude-…` runs unchanged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer

from envforge.agents.played import HOLD_S, PlayedQueue, PlayedServer, pending
from envforge.errors import BadInput

PLACEHOLDER_KEY = "played-model-no-key"
"""What the SDK sends as its key to the played server (which reads no key)."""

play = typer.Typer(
    help="Play the model: a local Messages API server whose replies come from a queue folder.",
    no_args_is_help=True,
)


@play.command("serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve_command(
    ctx: typer.Context,
    queue: Path = typer.Option(
        ..., "--queue", help="Folder for NNNN.request.json / NNNN.reply.json."
    ),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0: any free one)."),
    answers: Path = typer.Option(
        None,
        "--answers",
        help="A cassette whose recorded replies answer the first requests by themselves (to "
        "re-record a run after a prompt changed); later requests wait for reply files.",
    ),
    hold_s: float = typer.Option(
        HOLD_S,
        "--hold-s",
        help="Seconds to wait for a reply before sending the success status and keep-alive "
        "spaces (an error reply must come before).",
    ),
) -> None:
    """Serve the queue. With a command after the options (`-- envforge translate ...`), run it
    with ANTHROPIC_BASE_URL pointing here and exit with its status; else serve until Ctrl-C.

    Each request becomes NNNN.request.json and NNNN.new.txt (what is new, readably) in the
    queue; write NNNN.reply.json ({"content": [text and tool_use blocks]}) to answer it."""
    if hold_s <= 0 or hold_s >= 590:
        raise BadInput("--hold-s: give seconds between 0 and 590 (the SDK gives up at 600)")
    recorded = []
    if answers is not None:
        from envforge.agents.cassette import ReplayModel

        recorded = [response for _, response in ReplayModel(answers).calls]
    server = PlayedServer(PlayedQueue(queue, recorded), port=port, hold_s=hold_s).start()
    (queue / "url").write_text(server.url + "\n")
    print(f"played model: {server.url} answers from {queue}", flush=True)
    print(f"export ANTHROPIC_BASE_URL={server.url} ANTHROPIC_API_KEY={PLACEHOLDER_KEY}", flush=True)
    try:
        if ctx.args:
            env = {
                **os.environ,
                "ANTHROPIC_BASE_URL": server.url,
                "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
            }
            env.pop("ANTHROPIC_AUTH_TOKEN", None)
            child = subprocess.Popen(ctx.args, env=env)

            def stop(*_: object) -> None:  # a killed server takes its command along
                child.terminate()

            signal.signal(signal.SIGTERM, stop)
            raise typer.Exit(child.wait())
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            time.sleep(3600)
    finally:
        server.close()


@play.command("wait")
def wait_command(
    queue: Path = typer.Option(..., "--queue", help="The queue folder `play serve` writes."),
    timeout: float = typer.Option(
        300.0, "--timeout", help="Seconds to wait for a request without a reply."
    ),
) -> None:
    """Wait for the oldest request without a reply and print what is new in it (its
    NNNN.new.txt). Exit 0 with a request, 1 when none came within --timeout."""
    deadline = time.monotonic() + timeout
    while not queue.is_dir():  # the server may still be starting
        if time.monotonic() >= deadline:
            raise BadInput(f"--queue: no folder {queue} (start `envforge play serve` first)")
        time.sleep(0.5)
    while True:
        number = pending(queue)
        if number is not None and (queue / f"{number:04d}.new.txt").is_file():
            problem = queue / f"{number:04d}.problem.txt"
            if problem.is_file():
                print(f"=== problem with the last reply ===\n{problem.read_text()}")
            print((queue / f"{number:04d}.new.txt").read_text(), end="")
            return
        if time.monotonic() >= deadline:
            print(f"no request waiting in {queue} after {timeout:.0f}s", file=sys.stderr)
            raise typer.Exit(1)
        time.sleep(0.5)


def register(app: typer.Typer) -> None:
    app.add_typer(play, name="play")
