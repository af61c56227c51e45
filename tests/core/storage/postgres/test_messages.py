"""Messages that tell the truth on PostgreSQL (issue 29, point 7).

An application role's purge is finished by the tables' owner, and says so;
a connection lost in the middle of a submit is the connection's loss, not
the plugin's fault; a server that went away reads as such, not as a busy
store.
"""

from __future__ import annotations

import json

from memors_core.testing import run_cli


def test_an_application_role_purge_says_the_owner_finishes_it_and_how(roles, tmp_path):
    r = run_cli("remember", "-", "--json", db=roles.app_url, input="Alice met Bob in Paris.")
    assert r.code == 0, r
    document = json.loads(r.out)["document"]

    r = run_cli("purge", document, "--yes", db=roles.app_url)
    assert r.code == 0, r
    command = f"`memors-mcp purge {document} --yes`"
    assert f"only their owner ({roles.owner}) can finish the purge" in r.out
    assert f"{command} (or any memors command that opens the store) connected as {roles.owner}" in (
        r.out
    )
    assert "old pages of the file" not in r.out  # SQLite's reason, never true here
    data = json.loads(run_cli("purge", document, "--yes", "--json", db=roles.app_url).out)
    assert data["finished"] is False and roles.owner in data["left"]

    r = run_cli("lint", "--json", db=roles.app_url)
    [unfinished] = [f for f in json.loads(r.out)["findings"] if f["rule"] == "unfinished-purge"]
    assert f"only their owner ({roles.owner}) can finish it" in unfinished["message"]
    assert command in unfinished["message"]
    assert "again to finish it" not in unfinished["message"]  # what the app role cannot do

    # The owner's lint gives the owner's advice, and the owner's command does finish it.
    r = run_cli("lint", "--json", db=roles.owner_url)
    [unfinished] = [f for f in json.loads(r.out)["findings"] if f["rule"] == "unfinished-purge"]
    assert f"run {command} again to finish it" in unfinished["message"]
