"""What every command that talks to a server shares: the target and the call.

The client commands (``runs``, ``pipelines``, ``apply``, ``backfill``, ``run NAME``) never touch
the engine: they reach a server — ``dirigent dev`` on this machine or ``dirigent api`` in a
cluster — over ``dirigent.api.client.Client``, so they read exactly what the API answers. The
server comes from ``--url``/``--token``, then ``DIRIGENT_URL``/``DIRIGENT_TOKEN``, then a
profile (``profiles``); the namespace from ``-n``, ``DIRIGENT_NAMESPACE`` or the profile.

``Remote.run`` turns every expected failure into one line and an exit code (``replying``):
a Problem from the server is 1, a target that cannot be used is 2, a server that cannot be
reached is 3 — never a traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, NoReturn, TypeVar

import httpx
import typer

from dirigent.api.client import ApiError, Client
from dirigent.cli import replying
from dirigent.cli.profiles import ProfileError, Target, resolve_target
from dirigent.cli.replying import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE

__all__ = [
    "NamespaceOption",
    "ProfileOption",
    "Remote",
    "TokenOption",
    "UrlOption",
    "call",
    "refused",
]

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
            replying.fail(str(err), EXIT_USAGE)

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
        replying.fail(
            f"cannot reach {target.url} ({_reason(err)}); is the server running? "
            "(`dirigent dev` prints its URL)",
            EXIT_UNREACHABLE,
        )
    except httpx.TimeoutException:
        replying.fail(f"{target.url} did not answer in time", EXIT_UNREACHABLE)
    except httpx.HTTPError as err:
        replying.fail(f"{target.url}: {_reason(err)}", EXIT_UNREACHABLE)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def refused(err: ApiError, target: Target) -> NoReturn:
    """The server's Problem as one line (and each located problem under it); exit 1."""
    doc = err.problem
    hint = ""
    if doc.status == 401:
        hint = " (set DIRIGENT_TOKEN or --token; `dirigent dev` prints one)"
    located = len(doc.problems) > 1 or (doc.problems and doc.problems[0].location)
    replying.fail(f"{doc.code}: {doc.detail}{hint}", EXIT_FAILED, doc.problems if located else ())


def _reason(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[-1] if text else type(err).__name__
