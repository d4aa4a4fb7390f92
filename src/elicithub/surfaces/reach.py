"""Who a surface reaches about an approval: the people it names and the members of the hub's static groups it names,
those with an account there, never its requester (their own chat shows it when they may answer it). The members of an
identity provider's group cannot be known ahead, so they are reached only where they come to answer."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from elicithub.core.approval import People


def accounts_of(
    to: People, requester: str, groups: Mapping[str, Collection[str]], accounts: Mapping[str, str]
) -> list[str]:
    """The accounts (`accounts`: a surface's account id -> hub user) of `to`, sorted."""
    people = {*to.users, *(m for g in to.groups for m in groups.get(g, ()))} - {requester}
    return sorted(account for account, user in accounts.items() if user in people)
