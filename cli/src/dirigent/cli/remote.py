"""What every command that talks to a server shares: the target, the client, the exit codes.

The client commands (``runs``, ``pipelines``, ``apply``, ``backfill``) never touch the engine:
they reach a server — ``dirigent dev`` on this machine or ``dirigent api`` in a cluster — over
``dirigent.api.client.Client``, so they read exactly what the API answers. The server comes
from ``--url``/``--token``, then ``DIRIGENT_URL``/``DIRIGENT_TOKEN``, then a profile
(``profiles``); the namespace from ``-n``, ``DIRIGENT_NAMESPACE`` or the profile.

Every expected failure is one line on stderr and an exit code a script can branch on:

====  =====================================================================================
0     done
1     the server refused (its Problem code and message; each located problem on its own line)
      or what was asked for finished badly (an apply with problems, a backfill window refused)
2     usage: a bad flag or file, no server configured, a profile that cannot be used
3     the server could not be reached (not running, wrong URL, timed out)
====  =====================================================================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, NoReturn, TypeVar

import httpx
import typer

from dirigent.api.client import ApiError, Client
from dirigent.cli import process
from dirigent.cli.profiles import ProfileError, Target, resolve_target
from dirigent.engine.problems import Problem

__all__ = [
    "EXIT_REFUSED",
    "EXIT_UNREACHABLE",
    "NamespaceOption",
    "ProfileOption",
    "Remote",
    "TokenOption",
    "UrlOption",
    "call",
    "print_problems",
]

EXIT_REFUSED = 1
EXIT_UNREACHABLE = 3
T = TypeVar("T")

UrlOption = Annotated[
    str | None, typer.Option("--url", help="The server (DIRIGENT_URL; `dirigent dev` prints it).")
]
TokenOption = Annotated[
    str | None,
    typer.Option("--token", help="The bearer token (DIRIGENT_TOKEN).", show_default=False),
]
ProfileOption = Annotated[
    str | None,
    typer.Option("--profile", help="A profile from .dirigent/profiles.yaml (DIRIGENT_PROFILE)."),
]
NamespaceOption = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="The namespace (DIRIGENT_NAMESPACE; default)."),
]


class Remote:
    """The server a command talks to; ``run`` calls it with a client and maps every failure."""

    def __init__(
        self,
        url: str | None,
        token: str | None,
        profile: str | None,
        namespace: str | None,
    ) -> None:
        try:
            self.target: Target = resolve_target(url, token, profile, namespace)
        except ProfileError as err:
            process.fail(str(err), process.EXIT_USAGE)

    @property
    def namespace(self) -> str:
        return self.target.namespace

    def run(self, action: Callable[[Client], Awaitable[T]]) -> T:
        return call(self.target, action)


def call(target: Target, action: Callable[[Client], Awaitable[T]]) -> T:
    """Run ``action`` with a client on ``target``; every expected failure is one line."""

    async def go() -> T:
        async with Client(target.url, target.token) as client:
            return await action(client)

    try:
        return asyncio.run(go())
    except ApiError as err:
        refused(err, target)
    except (httpx.ConnectError, httpx.ConnectTimeout) as err:
        process.fail(
            f"cannot reach {target.url} ({_reason(err)}); is the server running? "
            "(`dirigent dev` prints its URL)",
            EXIT_UNREACHABLE,
        )
    except httpx.TimeoutException:
        process.fail(f"{target.url} did not answer in time", EXIT_UNREACHABLE)
    except httpx.HTTPError as err:
        process.fail(f"{target.url}: {_reason(err)}", EXIT_UNREACHABLE)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def refused(err: ApiError, target: Target) -> NoReturn:
    """The server's Problem as one line (and each located problem under it); exit 1."""
    doc = err.problem
    hint = ""
    if doc.status == 401:
        hint = " (set DIRIGENT_TOKEN or --token; `dirigent dev` prints one)"
    if len(doc.problems) > 1 or (doc.problems and doc.problems[0].location):
        typer.echo(f"error: {doc.code}: {doc.detail}{hint}", err=True)
        print_problems(doc.problems)
        raise typer.Exit(EXIT_REFUSED)
    process.fail(f"{doc.code}: {doc.detail}{hint}", EXIT_REFUSED)


def print_problems(problems: list[Problem], where: str = "") -> None:
    """Each problem on its own stderr line: ``where: location: message [code]``."""
    for p in problems:
        at = ": ".join(x for x in (where, p.location) if x)
        typer.echo(f"  {at + ': ' if at else ''}{p.message} [{p.code}]", err=True)


def _reason(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[-1] if text else type(err).__name__
