"""A run's stream watcher is shared by callers with the same rights key: only callers whose approvals' rights are the
same may share one, whatever their role names hold."""

from __future__ import annotations

from http_api.access import rights_field, rights_key
from http_api.identity import Principal


def alice(*roles: str) -> Principal:
    return Principal(id="alice", roles=roles, auth_type="jwt")


def test_the_same_roles_in_another_order_share_a_key() -> None:
    assert rights_key(alice("Reviewers", "Supervisors")) == rights_key(alice("Supervisors", "Reviewers"))


def test_a_role_holding_a_separator_is_not_two_roles() -> None:
    assert rights_key(alice("Reviewers\nSupervisors")) != rights_key(alice("Reviewers", "Supervisors"))
    assert rights_key(alice("Reviewers,Supervisors")) != rights_key(alice("Reviewers", "Supervisors"))


def test_another_caller_or_auth_mode_has_another_key() -> None:
    assert rights_key(alice("Reviewers")) != rights_key(Principal(id="bob", roles=("Reviewers",), auth_type="jwt"))
    assert rights_key(alice()) != rights_key(Principal(id="alice", auth_type="easyauth"))


def test_a_key_names_the_credential_its_roles_came_in() -> None:
    """A stream refused for its viewer (`too_many_stream_viewers`) names the credential at fault."""
    assert rights_field(rights_key(alice("Reviewers"))) == "header.Authorization"
    assert rights_field(rights_key(Principal(id="alice", auth_type="easyauth"))) == "header.x-ms-client-principal"
    assert rights_field(rights_key(Principal(id="anonymous", auth_type="none"))) is None
    assert rights_field(()) is None
