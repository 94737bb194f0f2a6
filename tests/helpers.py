"""Shared test helpers: run the CLI in-process with a fixed, colourless console; check a one-line error; walk
the commands."""

from __future__ import annotations

from typer.testing import CliRunner

from rooflinectl.cli import app


def cli(*args: str, env: dict | None = None):
    """Invoke rooflinectl in-process; 100 columns, no colour, so output is stable."""
    runner = CliRunner()
    base = {"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"}
    return runner.invoke(app, list(args), env={**base, **(env or {})}, catch_exceptions=False)


def assert_one_line_error(result, *fragments: str):
    """Exit code 2, one line on stderr naming every fragment, and nothing on stdout."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[0]
    assert result.stdout == ""  # no number printed as if it were right


def command_paths(group, prefix=()):
    """Every command's path under ``group`` ('analyze', 'hardware show', ...), sub-commands included."""
    import typer

    click_group = typer.main.get_command(group) if not hasattr(group, "commands") else group
    for name, cmd in click_group.commands.items():
        if hasattr(cmd, "commands"):
            yield from command_paths(cmd, (*prefix, name))
        else:
            yield " ".join((*prefix, name))


def option_help(command: str, flag: str) -> str:
    """The help text of ``flag`` of the command at ``command`` ('measure', 'hardware show'), as written."""
    import typer

    cmd = typer.main.get_command(app)
    for name in command.split():
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return next(p.help for p in cmd.params if flag in p.opts)
